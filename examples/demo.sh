#!/bin/sh
# make demo: the main job on a built-in example.
TWIN=${1:-build/twin}
set -e
echo "\$ twin model show llama2-7b"
"$TWIN" model show llama2-7b
