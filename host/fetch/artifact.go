package fetch

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

// Annotation keys the artifact's manifest carries.
const (
	annotationPolicySource = "io.kubewarden.policy.source"
	annotationImageSource  = ocispec.AnnotationSource
)

// ErrNotAnnotated is returned by NewArtifact for a module without metadata
// when force is false, as kwctl push refuses one.
var ErrNotAnnotated = errors.New("the module is not annotated (no " + metadata.SectionName + " section): annotate it first, or force the push")

// Artifact is a policy as the OCI artifact kwctl push writes: an image
// manifest whose config is the two bytes {} of media type
// application/vnd.wasm.config.v1+json and whose single layer is the module
// itself, application/vnd.wasm.content.layer.v1+wasm. The manifest carries
// the metadata's single-line annotations (trimmed) and
// org.opencontainers.image.source taken from io.kubewarden.policy.source,
// and is serialised as canonical JSON (sorted keys, no spaces, no
// mediaType field), so the same module gives the same manifest digest as
// kwctl push. Nothing time-dependent goes in.
type Artifact struct {
	Wasm               []byte
	Config             []byte
	Manifest           []byte
	ConfigDescriptor   ocispec.Descriptor
	LayerDescriptor    ocispec.Descriptor
	ManifestDescriptor ocispec.Descriptor
	// Annotations are the manifest's annotations; nil if it has none.
	Annotations map[string]string
	// Dropped are the metadata annotations left out for spanning lines.
	Dropped []string
}

// NewArtifact builds the artifact of wasm. A module without metadata is
// refused unless force is set; it then has no annotations.
func NewArtifact(wasm []byte, force bool) (*Artifact, error) {
	section, ok, err := metadata.ReadCustomSection(wasm, metadata.SectionName)
	if err != nil {
		return nil, fmt.Errorf("read module metadata: %w", err)
	}
	art := &Artifact{Wasm: wasm, Config: []byte("{}")}
	switch {
	case ok:
		md, err := metadata.Decode(section)
		if err != nil {
			return nil, fmt.Errorf("read module metadata: %w", err)
		}
		if md.Annotations != nil {
			art.Annotations, art.Dropped = ociAnnotations(md.Annotations)
			if err := checkControlCharacters(art.Annotations); err != nil {
				return nil, err
			}
		}
	case !force:
		return nil, ErrNotAnnotated
	}
	art.ConfigDescriptor = ocispec.Descriptor{MediaType: MediaTypeWasmConfig, Digest: digest.FromBytes(art.Config), Size: int64(len(art.Config))}
	art.LayerDescriptor = ocispec.Descriptor{MediaType: MediaTypeWasmLayer, Digest: digest.FromBytes(wasm), Size: int64(len(wasm))}
	art.Manifest = canonicalManifest(art.ConfigDescriptor, art.LayerDescriptor, art.Annotations)
	art.ManifestDescriptor = ocispec.Descriptor{
		MediaType:   ocispec.MediaTypeImageManifest,
		Digest:      digest.FromBytes(art.Manifest),
		Size:        int64(len(art.Manifest)),
		Annotations: art.Annotations,
	}
	return art, nil
}

// ociAnnotations keeps the annotations whose values have at most one line
// (a final line break does not count), trims them, and adds the OCI
// source annotation from the Kubewarden one unless it is already there.
func ociAnnotations(in map[string]string) (map[string]string, []string) {
	out := make(map[string]string, len(in)+1)
	var dropped []string
	for k, v := range in {
		if lineCount(v) > 1 {
			dropped = append(dropped, k)
			continue
		}
		out[k] = strings.TrimSpace(v)
	}
	if src, ok := out[annotationPolicySource]; ok {
		if _, set := out[annotationImageSource]; !set {
			out[annotationImageSource] = src
		}
	}
	sort.Strings(dropped)
	return out, dropped
}

// checkControlCharacters refuses annotation values with control
// characters: canonical JSON writes them raw, which no JSON parser (and so
// no registry) accepts.
func checkControlCharacters(annotations map[string]string) error {
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if i := strings.IndexFunc(k+annotations[k], func(r rune) bool { return r < 0x20 }); i >= 0 {
			return fmt.Errorf("metadata annotations[%q]: control character in the key or value; a manifest cannot carry it", k)
		}
	}
	return nil
}

// lineCount counts lines as Rust's str::lines does: split at \n, a final
// \n does not start another line, and the empty string has none.
func lineCount(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// canonicalManifest writes the manifest in canonical JSON: keys sorted,
// no insignificant space, strings escaping only the quote and backslash.
func canonicalManifest(config, layer ocispec.Descriptor, annotations map[string]string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	if annotations != nil {
		b.WriteString(`"annotations":{`)
		keys := make([]string, 0, len(annotations))
		for k := range annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			canonicalString(&b, k)
			b.WriteByte(':')
			canonicalString(&b, annotations[k])
		}
		b.WriteString(`},`)
	}
	b.WriteString(`"config":`)
	canonicalDescriptor(&b, config)
	b.WriteString(`,"layers":[`)
	canonicalDescriptor(&b, layer)
	b.WriteString(`],"schemaVersion":2}`)
	return b.Bytes()
}

func canonicalDescriptor(b *bytes.Buffer, d ocispec.Descriptor) {
	b.WriteString(`{"digest":`)
	canonicalString(b, d.Digest.String())
	b.WriteString(`,"mediaType":`)
	canonicalString(b, d.MediaType)
	b.WriteString(`,"size":`)
	b.WriteString(strconv.FormatInt(d.Size, 10))
	b.WriteByte('}')
}

func canonicalString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}
