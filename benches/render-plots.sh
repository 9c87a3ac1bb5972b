#!/bin/sh
# Renders every SVG plot in a directory (default target/bench-report) to a
# PNG beside it, with rsvg-convert (Debian: librsvg2-bin, installed when
# missing), so plots can be looked at before they go into the README.
set -e
dir=${1:-target/bench-report}
if ! command -v rsvg-convert >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=$( [ "$(id -u)" = 0 ] || echo sudo )
        $SUDO apt-get update -qq && $SUDO apt-get install -y -qq librsvg2-bin
    else
        echo "error: rsvg-convert (librsvg) is needed to render the plots" >&2
        exit 1
    fi
fi
found=0
for svg in "$dir"/*.svg; do
    [ -e "$svg" ] || continue
    found=1
    rsvg-convert --background-color=white -o "${svg%.svg}.png" "$svg"
    echo "rendered ${svg%.svg}.png"
done
[ "$found" = 1 ] || { echo "error: no SVG in $dir" >&2; exit 1; }
