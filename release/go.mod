// Release tooling: the container image builder (make image), the release
// assembly (make release), the policy metadata jobs kwctl does (make
// annotated, make artifacthub: cmd/policymeta) and their tests. A module of
// its own, so that go-containerregistry and CycloneDX stay out of the
// product's module.
// Pushing and signing the release are kwctl's, oras's and cosign's jobs
// (docs/INSTALL.md, "Publishing").
//
// Pins, explicit (the module proxy refuses @latest for some modules):
// go-containerregistry v0.22.1.
module github.com/yunikorn-userinfo/userinfo/release

go 1.26.0

require (
	github.com/CycloneDX/cyclonedx-go v0.12.0
	github.com/google/go-containerregistry v0.22.1
	github.com/spf13/cobra v1.10.2
	github.com/stretchr/testify v1.12.1
	github.com/yunikorn-userinfo/userinfo v0.0.0-00010101000000-000000000000
	go.yaml.in/yaml/v2 v2.4.4
	golang.org/x/sys v0.48.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/docker/docker-credential-helpers v0.9.5 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/tetratelabs/wazero v1.12.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/xeipuuv/gojsonpointer v0.0.0-20190905194746-02993c407bfb // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
)

replace github.com/yunikorn-userinfo/userinfo => ../
