#!/usr/bin/env bash
# Build libfabric's own RMA bandwidth and RDM ping-pong benchmarks
# (fabtests' fi_rma_bw, fi_rdm_pingpong) against the installed libfabric,
# for scripts/ofi-bench.sh's like-for-like comparison. Debian
# packages fabtests in no package; the sources are libfabric's, of the
# installed version.
#
#   scripts/fabtests-build.sh SRC
#
# SRC is one of
# - a fabtests source tree (the fabtests/ folder of libfabric vX.Y.Z, e.g.
#   from the release tarball libfabric-X.Y.Z.tar.bz2 on GitHub), or
# - a libfabric git repository (clone of github.com/ofiwg/libfabric): the
#   folder is taken from the tag v<installed version> with `git archive`.
# Default: $FABTESTS_SRC. Nothing is fetched: the script needs no network.
#
# Output: target/fabtests/fi_rma_bw and target/fabtests/fi_rdm_pingpong
# (compiled with gcc -O2 from the C sources each needs; no autotools).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-${FABTESTS_SRC:-}}
OUT=target/fabtests
if [ -z "$SRC" ]; then
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
VERSION=$(pkg-config --modversion libfabric 2>/dev/null) || {
    echo "libfabric's pkg-config file not found (apt-get install libfabric-dev)" >&2
    exit 1
}
mkdir -p "$OUT"
if [ ! -f "$SRC/benchmarks/rma_bw.c" ] && git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    TAG="v$VERSION"
    git -C "$SRC" rev-parse -q --verify "refs/tags/$TAG" >/dev/null || {
        echo "$SRC has no tag $TAG (the installed libfabric is $VERSION)" >&2
        exit 1
    }
    rm -rf "$OUT/src"
    mkdir -p "$OUT/src"
    git -C "$SRC" archive "$TAG" fabtests | tar -x -C "$OUT/src"
    TREE=$OUT/src/fabtests
    echo "# fabtests from $SRC at $TAG"
else
    TREE=$SRC
    [ -f "$TREE/benchmarks/rma_bw.c" ] || {
        echo "$TREE is neither a git repository nor a fabtests tree (no benchmarks/rma_bw.c)" >&2
        exit 1
    }
    have=$(sed -n 's/^AC_INIT(\[fabtests\], \[\([^]]*\)\].*/\1/p' "$TREE/configure.ac" 2>/dev/null || true)
    if [ -n "$have" ] && [ "${have%%[a-z]*}" != "$VERSION" ]; then
        echo "# warning: fabtests $have beside libfabric $VERSION" >&2
    fi
    echo "# fabtests from $TREE (${have:-unknown version})"
fi
# libfabtests.la and benchmarks_srcs of fabtests' Makefile.am; the device
# memory files compile to stubs without their runtimes' headers.
COMMON="$TREE/common/shared.c $TREE/common/hmem.c $TREE/common/hmem_cuda.c
    $TREE/common/hmem_rocr.c $TREE/common/hmem_ze.c $TREE/common/hmem_neuron.c
    $TREE/benchmarks/benchmark_shared.c"
CFLAGS="-O2 -D_GNU_SOURCE -I$TREE/include -I$TREE/include/unix $(pkg-config --cflags libfabric)"
LIBS="$(pkg-config --libs libfabric) -lpthread -lm -ldl"
for t in rma_bw rdm_pingpong; do
    # shellcheck disable=SC2086 # word splitting of the lists intended
    gcc $CFLAGS -o "$OUT/fi_$t" "$TREE/benchmarks/$t.c" $COMMON $LIBS
    echo "built $OUT/fi_$t"
done
