#!/usr/bin/env bash
# bench_serving.py's HTTP load generator, hey (Debian's package), installed when missing: with apt-get as root
# or through passwordless sudo. Where neither works it says how; the benchmark then measures in process only.
set -u
command -v hey >/dev/null && exit 0
if [ "$(id -u)" = 0 ]; then
    as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    as_root=
fi
if [ -n "${as_root+set}" ] && command -v apt-get >/dev/null; then
    "${as_root[@]}" apt-get install -y -q hey || { "${as_root[@]}" apt-get update -q && "${as_root[@]}" apt-get install -y -q hey; }
    command -v hey >/dev/null && exit 0
fi
echo "hey is not installed and could not be: run 'sudo apt-get install hey' (Debian, Ubuntu) or" \
     "'go install github.com/rakyll/hey@latest'; bench/bench_serving.py skips its HTTP part without it" >&2
exit 0
