// Kubewarden conformance: the policy module evaluated on wasmtime the way
// Kubewarden's policy-server evaluates it. A module of its own so that
// wasmtime-go (cgo, and libwasmtime inside its module) stays out of the
// main module.
module github.com/yunikorn-userinfo/userinfo/test/kubewarden

go 1.26.0

require (
	github.com/bytecodealliance/wasmtime-go/v39 v39.0.1
	github.com/stretchr/testify v1.12.0
	github.com/tidwall/gjson v1.20.0
	github.com/yunikorn-userinfo/userinfo v0.0.0-00010101000000-000000000000
)

require (
	github.com/evanphx/json-patch/v5 v5.9.11 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/tetratelabs/wazero v1.12.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/sys v0.47.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/yunikorn-userinfo/userinfo => ../..
