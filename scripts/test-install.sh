#!/usr/bin/env bash
# Installs the built cge into a temporary prefix, then builds examples/x_plus_2y.c
# and the custom-op example out of tree against the installed copy only: with
# pkg-config (shared, and static against libcge.a) and as a CMake project
# through find_package(cge CONFIG) and cge::cge; runs each. Checks the SONAME
# and the layout.
# Usage: BUILD=build bash scripts/test-install.sh   (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${BUILD:-build}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cge-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "test-install: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }

major=$(sed -n 's/^#define CGE_VERSION_MAJOR \([0-9]*\)$/\1/p' "$prefix/include/cge/version.h")
version=$(sed -n 's/^#define CGE_VERSION_STRING "\(.*\)"$/\1/p' "$prefix/include/cge/version.h")
[ -n "$major" ] && [ -n "$version" ] || fail "no version in include/cge/version.h"

for f in include/cge/cge.h include/cge/es.h include/cge/es_ops.h include/cge/version.h \
         lib/libcge.so "lib/libcge.so.$major" "lib/libcge.so.$version" lib/libcge.a bin/cge \
         lib/pkgconfig/cge.pc lib/cmake/cge/cgeConfig.cmake lib/cmake/cge/cgeConfigVersion.cmake \
         lib/cmake/cge/cgeTargets.cmake share/doc/cge/cge.txt share/doc/cge/cge-compile.txt \
         share/doc/cge/cge-op-check.txt share/doc/cge/quickstart.md; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
# Every header the public ones include is installed.
for inc in $(sed -n 's/^#include "\(cge\/[^"]*\)".*/\1/p' "$prefix"/include/cge/*.h | sort -u); do
  [ -e "$prefix/include/$inc" ] || fail "include/$inc is included but not installed"
done
grep -q "usage: cge compile" "$prefix/share/doc/cge/cge-compile.txt" || fail "cge-compile.txt is not its --help"

soname=$(readelf -d "$prefix/lib/libcge.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libcge.so.$major" ] || fail "SONAME is '$soname', want libcge.so.$major"
[ "$(readlink "$prefix/lib/libcge.so")" = "libcge.so.$major" ] || fail "libcge.so is not a link to libcge.so.$major"

"$prefix/bin/cge" --version | grep -q "cge $version" || fail "installed cge --version"

# The CLI still runs with the build tree gone from sight: it links the layers
# statically, so nothing but system libraries is needed.
if ldd "$prefix/bin/cge" | grep -q "libcge\.so"; then fail "bin/cge needs libcge.so"; fi

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion cge)" = "$version" ] || fail "pkg-config --modversion cge"
cc=${CC:-cc}
mkdir -p "$tmp/pc"
cp examples/x_plus_2y.c "$tmp/pc/"
# shellcheck disable=SC2046
( cd "$tmp/pc" && $cc -std=c11 -O2 -o x_plus_2y x_plus_2y.c $(pkg-config --cflags --libs cge) ) \
  || fail "compile with pkg-config"
# shellcheck disable=SC2046
( cd "$tmp/pc" && $cc -std=c11 -O2 -o x_plus_2y_static x_plus_2y.c $(pkg-config --cflags cge) \
    -L"$prefix/lib" -Wl,-Bstatic -lcge -Wl,-Bdynamic $(pkg-config --libs-only-l --static cge | sed 's/-lcge//') ) \
  || fail "compile against libcge.a with pkg-config --static"
if ldd "$tmp/pc/x_plus_2y_static" | grep -q "libcge\.so"; then fail "static build needs libcge.so"; fi

mkdir -p "$tmp/cm"
cp examples/x_plus_2y.c "$tmp/cm/"
cat >"$tmp/cm/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(uses_cge LANGUAGES C)
find_package(cge 0 CONFIG REQUIRED)
add_executable(x_plus_2y x_plus_2y.c)
target_link_libraries(x_plus_2y PRIVATE cge::cge)
add_executable(x_plus_2y_static x_plus_2y.c)
target_link_libraries(x_plus_2y_static PRIVATE cge::cge_static)
CMAKE
cmake -S "$tmp/cm" -B "$tmp/cm/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_SKIP_RPATH=ON >"$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; fail "configure with find_package(cge)"; }
ninja -C "$tmp/cm/build" >>"$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; fail "build with cge::cge"; }

# The source tree's build must not be what runs: LD_LIBRARY_PATH names only
# the prefix, and the CMake build has no RPATH.
for exe in "$tmp/pc/x_plus_2y" "$tmp/pc/x_plus_2y_static" "$tmp/cm/build/x_plus_2y" \
           "$tmp/cm/build/x_plus_2y_static"; do
  rc=0
  out=$(LD_LIBRARY_PATH=$prefix/lib "$exe") || rc=$?
  [ "$rc" -eq 0 ] || { echo "$out"; fail "$exe exited with $rc"; }
  lib=$(LD_LIBRARY_PATH=$prefix/lib ldd "$exe" | sed -n 's/.*libcge\.so[^ ]* => \([^ ]*\).*/\1/p')
  case "$lib" in "" | "$prefix"/lib/*) ;; *) fail "$exe loads $lib, not the installed libcge" ;; esac
  grep -q "x + 2y on cge $version (library $version)" <<<"$out" || { echo "$out"; fail "$exe printed no version"; }
  echo "test-install: ok ${exe#"$tmp"/}${lib:+ (libcge from the prefix)}"
done
# The custom-op example, built out of tree against the installed headers
# only (a library never links libcge: the host process provides it), is
# loaded and checked by the installed CLI.
mkdir -p "$tmp/op"
cp examples/custom_op/add_custom.c "$tmp/op/"
# shellcheck disable=SC2046
( cd "$tmp/op" && $cc -std=c11 -O2 -shared -fPIC -o libadd_custom.so add_custom.c \
    $(pkg-config --cflags cge) ) || fail "compile the custom-op example with pkg-config"
out=$("$prefix/bin/cge" op-check --lib "$tmp/op/libadd_custom.so" 2>&1) \
  || { echo "$out"; fail "installed cge op-check refused the out-of-tree custom-op library"; }
grep -q "0 findings" <<<"$out" || { echo "$out"; fail "op-check of the custom-op example"; }
echo "test-install: ok op/libadd_custom.so (built out of tree, loaded by the installed cge)"
echo "test-install: ok — installed layout, SONAME $soname, pkg-config and find_package(cge) builds"
