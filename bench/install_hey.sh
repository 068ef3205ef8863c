#!/usr/bin/env bash
# bench_serving.py's HTTP load generator, hey (Debian's package), installed when missing: with apt-get as root
# or through passwordless sudo. Where neither works it says how and fails: `make bench` asked for the HTTP part.
set -u
command -v hey >/dev/null && exit 0
# Whether apt-get can run as root, and how: bash reads an empty array as unset, so the array alone cannot say.
can_install=false
as_root=()
if [ "$(id -u)" = 0 ]; then
    can_install=true
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    can_install=true
    as_root=(sudo -n)
fi
if $can_install && command -v apt-get >/dev/null; then
    "${as_root[@]}" apt-get install -y -q hey || { "${as_root[@]}" apt-get update -q && "${as_root[@]}" apt-get install -y -q hey; }
    command -v hey >/dev/null && exit 0
fi
echo "hey is not installed and could not be: run 'sudo apt-get install hey' (Debian, Ubuntu) or" \
     "'go install github.com/rakyll/hey@latest', or measure in process only: bench/bench_serving.py --duration 0" >&2
exit 1
