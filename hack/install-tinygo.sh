#!/usr/bin/env bash
# install-tinygo.sh: build and install TinyGo for the wasip1/wasi target on
# Debian 12 (bookworm), using only Debian packages and the Go module proxy.
#
#   - TinyGo source: the Go module github.com/tinygo-org/tinygo@vX (proxy).
#   - LLVM/clang/lld 19, wasi-libc, compiler-rt builtins for wasm32 and
#     wasm-opt (binaryen): Debian packages.
#   - The module zip has no git submodules (lib/wasi-libc, lib/compiler-rt,
#     src/net, ...). Instead of building wasi-libc from source, the wasip1
#     target is rewritten to link Debian's prebuilt /usr/lib/wasm32-wasi/libc.a
#     and libclang_rt.builtins-wasm32.a, and an empty src/net is created.
#
# Idempotent: re-running only re-checks packages, the target file and the link.
# Run as root. Environment knobs (defaults in brackets):
#   TINYGO_VERSION [0.41.1]   TinyGo version (module tag without the "v")
#   LLVM_MAJOR     [19]       Debian LLVM major version (bookworm: 14,15,16,19)
#   TINYGO_ROOT    [/opt/tinygo-$TINYGO_VERSION]  becomes TINYGOROOT
#   TINYGO_LINK    [/usr/local/bin/tinygo]        symlink to create ("" = none)
#   TINYGO_FORCE   [0]        1 = rebuild even if an install is present
#   GO             [go]       Go toolchain to build with (TinyGo 0.41.x needs Go 1.19-1.26)
#
# Tested: TinyGo 0.41.1 + Debian LLVM 19.1.7, Go 1.26.8. (0.42.0 does not build
# from this proxy as is: its dependency tinygo.org/x/espflasher@v0.8.1 is not
# served; replacing it with v0.6.0 needs a one-line patch to main.go.)
set -euo pipefail

TINYGO_VERSION="${TINYGO_VERSION:-0.41.1}"
LLVM_MAJOR="${LLVM_MAJOR:-19}"
TINYGO_ROOT="${TINYGO_ROOT:-/opt/tinygo-${TINYGO_VERSION}}"
TINYGO_LINK="${TINYGO_LINK-/usr/local/bin/tinygo}"
TINYGO_FORCE="${TINYGO_FORCE:-0}"
GO="${GO:-go}"

START=$(date +%s)
log() { printf '[install-tinygo +%ss] %s\n' "$(( $(date +%s) - START ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- packages --
PKGS=(
  "llvm-${LLVM_MAJOR}-dev" "libclang-${LLVM_MAJOR}-dev"    # cgo: libLLVM + libclang
  "clang-${LLVM_MAJOR}" "lld-${LLVM_MAJOR}"                # external clang, wasm-ld
  "libclang-rt-${LLVM_MAJOR}-dev-wasm32"                   # compiler-rt builtins (wasm32)
  wasi-libc                                              # libc.a + headers for wasm32-wasi
  binaryen                                               # wasm-opt: TinyGo runs it on every wasm build
  g++                                                    # cgo C++ parts of go-llvm
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "Debian packages already installed"
fi

WASI_SYSROOT=/usr/lib/wasm32-wasi
WASI_INCLUDE=/usr/include/wasm32-wasi
BUILTINS="/usr/lib/llvm-${LLVM_MAJOR}/lib/clang/${LLVM_MAJOR}/lib/wasi/libclang_rt.builtins-wasm32.a"
for f in "$WASI_SYSROOT/libc.a" "$WASI_INCLUDE/stdlib.h" "$BUILTINS" "/usr/bin/wasm-ld-${LLVM_MAJOR}" "/usr/bin/clang-${LLVM_MAJOR}"; do
  [[ -e "$f" ]] || die "expected file missing after apt install: $f"
done
command -v wasm-opt >/dev/null || die "wasm-opt not found"

# ------------------------------------------------------------------ go check --
command -v "$GO" >/dev/null || die "go not found (set GO=...)"
GOVER=$("$GO" env GOVERSION)           # e.g. go1.26.8
GOMINOR=$(echo "$GOVER" | sed -E 's/^go1\.([0-9]+).*/\1/')
case "$TINYGO_VERSION" in
  0.41.*) [[ "$GOMINOR" -ge 19 && "$GOMINOR" -le 26 ]] || die "TinyGo $TINYGO_VERSION supports Go 1.19-1.26, have $GOVER (try GOTOOLCHAIN=go1.26.x)";;
esac

# -------------------------------------------------------------- build TinyGo --
TINYGO="$TINYGO_ROOT/bin/tinygo"
STAMP="$TINYGO_ROOT/.install-stamp"
WANT_STAMP="tinygo=${TINYGO_VERSION} llvm=${LLVM_MAJOR} go=${GOVER}"
if [[ "$TINYGO_FORCE" != 1 && -x "$TINYGO" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT_STAMP" ]]; then
  log "TinyGo already built at $TINYGO_ROOT ($WANT_STAMP)"
else
  log "downloading github.com/tinygo-org/tinygo@v${TINYGO_VERSION} from the module proxy"
  # Note: 'go install pkg@version' fails here (it queries the @v/list endpoint
  # for deprecations, which this proxy refuses), so download + copy + build.
  SRC=$("$GO" mod download -json "github.com/tinygo-org/tinygo@v${TINYGO_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$SRC" && -d "$SRC" ]] || die "go mod download failed"
  STAGE="${TINYGO_ROOT}.staging"
  rm -rf "$STAGE"
  mkdir -p "$(dirname "$TINYGO_ROOT")"
  cp -r "$SRC" "$STAGE"
  chmod -R u+w "$STAGE"
  log "building tinygo with -tags=llvm${LLVM_MAJOR} (1-2 min on 2 cores)"
  (cd "$STAGE" && "$GO" build -buildvcs=false -tags="llvm${LLVM_MAJOR}" -o bin/tinygo .)
  rm -rf "$TINYGO_ROOT"
  mv "$STAGE" "$TINYGO_ROOT"
  echo "$WANT_STAMP" > "$STAMP"
fi

# ------------------------------------------- make the TINYGOROOT usable --
# src/net is the tinygo-org/net git submodule (not in the module zip). An empty
# directory makes TinyGo fall back to upstream Go's net package; only programs
# that import net or net/http are affected (they will not compile).
mkdir -p "$TINYGO_ROOT/src/net"

# wasip1 target (also used by -target=wasi and GOOS=wasip1 GOARCH=wasm) using
# Debian's wasi-libc and compiler-rt instead of building them from the missing
# lib/wasi-libc and lib/compiler-rt-builtins submodules.
TARGET="$TINYGO_ROOT/targets/wasip1.json"
[[ -f "$TARGET.upstream" ]] || cp "$TARGET" "$TARGET.upstream"
NEW_TARGET=$(cat <<EOF
{
	"llvm-target":   "wasm32-unknown-wasi",
	"cpu":           "generic",
	"features":      "+bulk-memory,+mutable-globals,+nontrapping-fptoint,+sign-ext,-multivalue,-reference-types",
	"build-tags":    ["tinygo.wasm"],
	"goos":          "wasip1",
	"goarch":        "wasm",
	"linker":        "wasm-ld",
	"gc":            "precise",
	"scheduler":     "asyncify",
	"default-stack-size": 65536,
	"cflags": [
		"-mbulk-memory",
		"-mnontrapping-fptoint",
		"-mno-multivalue",
		"-mno-reference-types",
		"-msign-ext",
		"-isystem", "${WASI_INCLUDE}"
	],
	"ldflags": [
		"--stack-first",
		"--no-demangle",
		"${WASI_SYSROOT}/libc.a",
		"${BUILTINS}"
	],
	"extra-files": [
		"src/runtime/asm_tinygowasm.S",
		"src/runtime/gc_boehm.c"
	],
	"emulator":      "wasmtime run --dir={tmpDir}::/tmp {}"
}
EOF
)
if [[ "$(cat "$TARGET")" != "$NEW_TARGET" ]]; then
  printf '%s\n' "$NEW_TARGET" > "$TARGET"
  log "wrote $TARGET (Debian wasi-libc + compiler-rt)"
fi

if [[ -n "$TINYGO_LINK" ]]; then
  mkdir -p "$(dirname "$TINYGO_LINK")"
  ln -sfn "$TINYGO" "$TINYGO_LINK"
fi

# ------------------------------------------------------------- smoke test --
log "smoke test: tinygo build -target=wasi (first run also fills TinyGo's cache)"
SMOKE=$(mktemp -d)
trap 'rm -rf "$SMOKE"' EXIT
cat > "$SMOKE/go.mod" <<'EOF'
module smoke

go 1.22
EOF
cat > "$SMOKE/main.go" <<'EOF'
package main

func main() { println("ok") }
EOF
# Kubewarden's usual flags, and the waPC-host-friendly variant (see notes).
(cd "$SMOKE" && "$TINYGO" build -o smoke1.wasm -target=wasi -no-debug . \
             && "$TINYGO" build -o smoke2.wasm -target=wasi -no-debug -buildmode=wasi-legacy -scheduler=none .)
for f in smoke1 smoke2; do
  [[ "$(head -c 4 "$SMOKE/$f.wasm" | od -An -c | tr -d ' ')" == '\0asm' ]] || die "smoke test did not produce a wasm module"
done

log "$("$TINYGO" version)"
log "TINYGOROOT=$TINYGO_ROOT${TINYGO_LINK:+, linked as $TINYGO_LINK}; done"
