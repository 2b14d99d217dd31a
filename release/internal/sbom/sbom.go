// Package sbom writes CycloneDX 1.6 software bills of materials, with
// cyclonedx-go, for the two things the project ships: the static binary
// (its Go modules read from the build information the Go linker embeds)
// and the TinyGo policy module (its Go modules listed by the go command for
// the policy package, since TinyGo embeds no build information). Every
// field comes from the inputs; the timestamp is the commit's, and the serial
// number is derived from the subject's digest, so a rebuild gives the same
// document.
package sbom

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// MediaType is the media type of the documents, as OCI referrers use it.
const MediaType = "application/vnd.cyclonedx+json"

// Subject is what a document describes.
type Subject struct {
	Name    string
	Version string
	// PURL is the subject's package URL.
	PURL string
	// Content is the subject's bytes (hashed into the document).
	Content []byte
	// Description and License (SPDX expression) describe the subject.
	Description, License string
	// Properties are extra name/value facts (build settings, tools).
	Properties map[string]string
}

// Module is one Go module in the subject.
type Module struct {
	Path, Version, Sum string
}

// Binary describes a Go binary from the build information in it.
func Binary(path string, subject Subject, created time.Time) (*cdx.BOM, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sbom of %s: read build information: %w", path, err)
	}
	mods := make([]Module, 0, len(info.Deps))
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		mods = append(mods, Module{Path: d.Path, Version: d.Version, Sum: d.Sum})
	}
	if subject.Properties == nil {
		subject.Properties = map[string]string{}
	}
	subject.Properties["go.version"] = info.GoVersion
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS", "GOARCH", "CGO_ENABLED", "-trimpath", "vcs.revision", "vcs.time", "vcs.modified":
			subject.Properties["go.build."+s.Key] = s.Value
		}
	}
	return document(subject, mods, created), nil
}

// PolicyModules lists the Go modules the policy package is built from,
// as the go command resolves them for the Wasm build (tinygo.wasm tag,
// wasip1/wasm), in moduleDir.
func PolicyModules(ctx context.Context, moduleDir, pkg string) ([]Module, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-tags", "tinygo.wasm",
		"-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}{{end}}{{end}}", pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("list the policy's modules: %w: %s", err, stderr.String())
	}
	sums, err := goSums(moduleDir)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var mods []Module
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if _, repl, ok := strings.Cut(line, " => "); ok {
			line = repl
		}
		f := strings.Fields(line)
		if len(f) != 2 || seen[line] {
			continue
		}
		seen[line] = true
		mods = append(mods, Module{Path: f[0], Version: f[1], Sum: sums[f[0]+" "+f[1]]})
	}
	return mods, nil
}

func goSums(dir string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return nil, fmt.Errorf("read go.sum: %w", err)
	}
	out := map[string]string{}
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) == 3 && !strings.HasSuffix(f[1], "/go.mod") {
			out[f[0]+" "+f[1]] = f[2]
		}
	}
	return out, nil
}

// Policy describes the policy module.
func Policy(subject Subject, mods []Module, created time.Time) *cdx.BOM {
	return document(subject, mods, created)
}

func document(subject Subject, mods []Module, created time.Time) *cdx.BOM {
	sum := sha256.Sum256(subject.Content)
	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuidFrom(sum[:])
	main := cdx.Component{
		BOMRef:      subject.PURL,
		Type:        cdx.ComponentTypeApplication,
		Name:        subject.Name,
		Version:     subject.Version,
		Description: subject.Description,
		PackageURL:  subject.PURL,
		Hashes:      &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}},
	}
	if subject.License != "" {
		main.Licenses = &cdx.Licenses{{Expression: subject.License}}
	}
	if props := properties(subject.Properties); len(props) > 0 {
		main.Properties = &props
	}
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &main,
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "yunikorn-userinfo release tooling (cyclonedx-go)",
		}}},
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	comps := make([]cdx.Component, 0, len(mods))
	refs := make([]string, 0, len(mods))
	for _, m := range mods {
		purl := "pkg:golang/" + m.Path + "@" + m.Version
		c := cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: purl}
		if m.Sum != "" {
			c.Properties = &[]cdx.Property{{Name: "go.sum", Value: m.Sum}}
		}
		comps = append(comps, c)
		refs = append(refs, purl)
	}
	bom.Components = &comps
	bom.Dependencies = &[]cdx.Dependency{{Ref: subject.PURL, Dependencies: &refs}}
	return bom
}

func properties(m map[string]string) []cdx.Property {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]cdx.Property, 0, len(keys))
	for _, k := range keys {
		out = append(out, cdx.Property{Name: k, Value: m[k]})
	}
	return out
}

// uuidFrom formats the first 16 bytes of a digest as a version 5 (name
// based, SHA) UUID.
func uuidFrom(sum []byte) string {
	u := make([]byte, 16)
	copy(u, sum)
	u[6] = (u[6] & 0x0f) | 0x50
	u[8] = (u[8] & 0x3f) | 0x80
	h := hex.EncodeToString(u)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Encode writes bom as indented CycloneDX 1.6 JSON.
func Encode(bom *cdx.BOM) ([]byte, error) {
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("encode the SBOM: %w", err)
	}
	return buf.Bytes(), nil
}
