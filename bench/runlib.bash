# shellcheck shell=bash
# What the bench runners (idlescale-run, wakeup-run) share; sourced.

# median of the numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
# a / z to 2 places, "-" when z is not above 0
ratio() { awk -v a="$1" -v z="$2" 'BEGIN { if (z > 0) printf "%.2f", a / z; else print "-" }'; }
