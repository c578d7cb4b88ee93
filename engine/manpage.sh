#!/bin/sh
# Builds ndplan.1 with help2man from the binary's own --help, adding one section per
# bundled command from 'ndplan COMMAND --help'. Usage: manpage.sh NDPLAN HELP2MAN OUT
set -eu
bin=$1 help2man=$2 out=$3
inc=$out.h2m
{
  echo "[COMMANDS]"
  for c in $("$bin" -e 'for _, c in ipairs(require("ndplan.cli").commands()) do print(c.name) end'); do
    echo ".SS $c"
    echo ".nf"
    "$bin" "$c" --help | sed 's/\\/\\e/g; s/^\./\\\&./'
    echo ".fi"
  done
} > "$inc"
"$help2man" --no-info --no-discard-stderr --section=1 \
  --name="plan how to parallelise LLM training over a cluster" \
  --include="$inc" --output="$out" "$bin"
rm -f "$inc"
