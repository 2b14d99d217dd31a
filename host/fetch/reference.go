package fetch

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"oras.land/oras-go/v2/registry"
)

// Scheme is where a module comes from.
type Scheme string

// The module locations kwctl accepts, and so do we.
const (
	SchemeFile     Scheme = "file"
	SchemeHTTPS    Scheme = "https"
	SchemeRegistry Scheme = "registry"
)

// Location is a parsed module reference.
type Location struct {
	// Raw is the reference as written.
	Raw    string
	Scheme Scheme
	// Path is the local path of a file location.
	Path string
	// URL is the address of an https location.
	URL *url.URL
	// Ref is the repository and tag or digest of a registry location; a
	// reference without either means the tag "latest", as in kwctl.
	Ref registry.Reference
}

// Host returns the host[:port] a remote location is fetched from.
func (l Location) Host() string {
	switch l.Scheme {
	case SchemeRegistry:
		return l.Ref.Registry
	case SchemeHTTPS:
		return l.URL.Host
	}
	return ""
}

// ParseLocation parses a module reference: a path, file://PATH,
// https://HOST/PATH or registry://HOST/REPOSITORY[:TAG|@DIGEST].
func ParseLocation(raw string) (Location, error) {
	loc := Location{Raw: raw}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		loc.Scheme, loc.Path = SchemeFile, raw
		return loc, nil
	}
	switch Scheme(scheme) {
	case SchemeFile:
		if rest == "" {
			return loc, fmt.Errorf("module location %q: empty path", raw)
		}
		loc.Scheme, loc.Path = SchemeFile, rest
	case SchemeHTTPS:
		u, err := url.Parse(raw)
		if err != nil {
			return loc, fmt.Errorf("module location %q: %w", raw, err)
		}
		if h := u.Hostname(); h == "" || h == "." || h == ".." || u.Path == "" || u.Path == "/" {
			return loc, fmt.Errorf("module location %q: want https://HOST/PATH", raw)
		}
		if u.User != nil {
			return loc, fmt.Errorf("module location %q: credentials in the URL are not accepted", u.Redacted())
		}
		loc.Scheme, loc.URL = SchemeHTTPS, u
	case SchemeRegistry:
		ref, err := ParseRegistryReference(rest)
		if err != nil {
			return loc, fmt.Errorf("module location %q: %w", raw, err)
		}
		loc.Scheme, loc.Ref = SchemeRegistry, ref
	case "http":
		return loc, fmt.Errorf("module location %q: plain http is not accepted; use https:// (list the host under insecure_sources in the sources file to allow falling back to http)", raw)
	default:
		return loc, fmt.Errorf("module location %q: unsupported scheme %q: want a path, file://, https:// or registry://", raw, scheme)
	}
	return loc, nil
}

// ParseRegistryReference parses HOST[:PORT]/REPOSITORY[:TAG|@DIGEST]; a
// reference with neither tag nor digest gets the tag "latest".
func ParseRegistryReference(s string) (registry.Reference, error) {
	ref, err := registry.ParseReference(s)
	if err != nil {
		return ref, fmt.Errorf("%w: want HOST[:PORT]/REPOSITORY[:TAG|@DIGEST]", err)
	}
	if ref.Repository == "" {
		return ref, errors.New("no repository: want HOST[:PORT]/REPOSITORY[:TAG|@DIGEST]")
	}
	if ref.Reference == "" {
		ref.Reference = "latest"
	}
	return ref, nil
}
