#!/usr/bin/env bash
# make demo: back up a sample RocksDB store to the embedded file:// blob store, wipe it, restore it,
# and show that every key came back.
set -euo pipefail
BIN=${BIN:-.venv/bin}
D=${DEMO_DIR:-demo-data}
rm -rf "$D"
mkdir -p "$D"
# The embedded default blob store is file://$XDG_DATA_HOME/statectl/blobs; keep the demo's inside $D.
case "$D" in /*) export XDG_DATA_HOME="$D/xdg" ;; *) export XDG_DATA_HOME="$PWD/$D/xdg" ;; esac
STORE="$D/state/page-counts/Partition_0"
run() { printf '\n$ %s\n' "$*"; "$@"; }

echo "== generating a sample store: 20000 keys of 512 random bytes"
"$BIN/python" -m tests.tools.genstore "$STORE" --keys 20000 --value-size 512
before=$("$BIN/python" -m tests.tools.genstore --fingerprint "$STORE")

run "$BIN/statectl" backup --job demo --state-dir "$D/state" --store page-counts
run "$BIN/statectl" snapshots list --job demo --store page-counts
printf '\n$ rm -rf %s   # wipe the store and its local checkpoint\n' "$D/state/page-counts"
rm -rf "$D/state/page-counts"
run "$BIN/statectl" restore --job demo --state-dir "$D/state" --store page-counts
after=$("$BIN/python" -m tests.tools.genstore --fingerprint "$STORE")

echo
if [ "$before" = "$after" ]; then
  echo "OK: all ${after%% *} keys came back, byte for byte (sha256 ${after#* })"
else
  echo "MISMATCH: before=$before after=$after" >&2
  exit 1
fi
