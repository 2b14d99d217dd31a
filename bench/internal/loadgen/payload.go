package loadgen

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"regexp"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// Payload is one AdmissionReview to post. It is kept as the bytes around the
// contents of request.uid, so each request gets a fresh uid without the
// document being decoded and re-encoded: fixtures that no encoder would
// produce (duplicate keys, odd spacing) reach the server byte for byte.
type Payload struct {
	// Name identifies the payload in messages: a fixture case name or a file.
	Name string
	// Expect is the response.allowed the server must answer; nil when the
	// verdict is not checked.
	Expect *bool
	// prefix ends with the opening quote of request.uid and suffix starts
	// with its closing quote.
	prefix, suffix []byte
}

// reviewHeader wraps a bare AdmissionRequest, the fixtures' format, into the
// AdmissionReview v1 kube-apiserver sends.
const reviewHeader = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":`

// NewPayload prepares doc, a bare AdmissionRequest or a whole
// AdmissionReview, for posting. Its request must carry a string uid, which
// is replaced on every request.
func NewPayload(name string, doc []byte, expect *bool) (Payload, error) {
	doc = bytes.TrimSpace(doc)
	if !gjson.ValidBytes(doc) {
		return Payload{}, fmt.Errorf("payload %s: not valid JSON", name)
	}
	review := doc
	if gjson.GetBytes(doc, "kind").String() != "AdmissionReview" {
		review = make([]byte, 0, len(reviewHeader)+len(doc)+1)
		review = append(review, reviewHeader...)
		review = append(review, doc...)
		review = append(review, '}')
	}
	uid := gjson.GetBytes(review, "request.uid")
	if uid.Type != gjson.String || uid.Index <= 0 || string(review[uid.Index:uid.Index+len(uid.Raw)]) != uid.Raw {
		return Payload{}, fmt.Errorf("payload %s: request.uid is missing or not a string", name)
	}
	end := uid.Index + len(uid.Raw) - 1 // the closing quote
	return Payload{
		Name:   name,
		Expect: expect,
		prefix: bytes.Clone(review[:uid.Index+1]),
		suffix: bytes.Clone(review[end:]),
	}, nil
}

// body returns the AdmissionReview with uid as request.uid, in a new slice:
// the transport may still read a request body after the response arrived,
// so bodies are never reused.
func (p *Payload) body(uid []byte) []byte {
	b := make([]byte, 0, len(p.prefix)+len(uid)+len(p.suffix))
	b = append(b, p.prefix...)
	b = append(b, uid...)
	return append(b, p.suffix...)
}

// LoadFixtures prepares the shared fixture cases (internal/fixtures) whose
// names match, or all of them when match is nil. A case's verdict is
// checked only when the case runs with default settings, the ones a server
// started without a settings file has: the others expect settings that the
// server under load does not have.
func LoadFixtures(match *regexp.Regexp) ([]Payload, error) {
	cases, err := fixtures.Load()
	if err != nil {
		return nil, fmt.Errorf("load fixtures: %w", err)
	}
	var out []Payload
	for _, c := range cases {
		if match != nil && !match.MatchString(c.Name) {
			continue
		}
		var expect *bool
		if string(c.Settings) == "{}" {
			allowed := c.Expect.Allowed
			expect = &allowed
		}
		p, err := NewPayload(c.Name, c.Request, expect)
		if err != nil {
			return nil, fmt.Errorf("prepare fixture: %w", err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("load fixtures: no case name matches %q", match)
	}
	return out, nil
}

// LoadFile prepares the AdmissionReview or AdmissionRequest in a file. Its
// verdict is not checked.
func LoadFile(path string) (Payload, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return Payload{}, fmt.Errorf("read request: %w", err)
	}
	return NewPayload(path, doc, nil)
}

// uidLen is the length of a uid: UUID-shaped, like the ones kube-apiserver
// sends, so bodies keep their real size.
const uidLen = 36

// uidSource makes uids unique within a run and, with 74 random bits per
// run, across runs against the same server.
type uidSource struct {
	random [10]byte
}

func newUIDSource() (*uidSource, error) {
	s := &uidSource{}
	if _, err := rand.Read(s.random[:]); err != nil {
		return nil, fmt.Errorf("seed uids: %w", err)
	}
	s.random[6] = s.random[6]&0x0f | 0x40 // version 4
	s.random[8] = s.random[8]&0x3f | 0x80 // RFC 4122 variant
	return s, nil
}

// appendUID appends the uid of request seq: the run's random bytes, then
// seq's low 48 bits (more requests than any run sends).
func (s *uidSource) appendUID(dst []byte, seq uint64) []byte {
	var b [16]byte
	copy(b[:], s.random[:])
	for i := 15; i >= 10; i-- {
		b[i] = byte(seq)
		seq >>= 8
	}
	const hex = "0123456789abcdef"
	for i, x := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hex[x>>4], hex[x&0x0f])
	}
	return dst
}
