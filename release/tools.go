//go:build tools

// The registry the tests start (internal/registry builds it). Importing its
// main package here keeps it, at exactly the version go.mod pins, in the
// module graph; the build tag keeps it out of every normal build.
package release

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
