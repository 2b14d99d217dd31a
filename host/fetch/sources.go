package fetch

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"

	"sigs.k8s.io/yaml"
)

// Sources says how to reach registries and HTTPS servers that are not
// plainly trusted, in the shape of Kubewarden's sources.yaml:
//
//	insecure_sources:
//	  - "registry.local:5000"
//	source_authorities:
//	  "registry.internal:443":
//	    - type: Path
//	      path: /etc/ssl/internal-ca.pem
//	    - type: Data
//	      data: |
//	        -----BEGIN CERTIFICATE-----
//	        ...
//
// Hosts are written as host or host:port, exactly as they appear in module
// references. An insecure source is tried over HTTPS first, then over HTTPS
// without certificate verification, then over plain HTTP, as Kubewarden's
// policy fetcher does. A host with authorities is verified against those
// certificates in addition to the system's.
type Sources struct {
	InsecureSources   []string
	SourceAuthorities map[string][]*x509.Certificate
}

// IsInsecure reports whether host (host or host:port) is an insecure source.
func (s *Sources) IsInsecure(host string) bool {
	return s != nil && slices.Contains(s.InsecureSources, host)
}

// authority returns the extra trusted certificates of host, nil if none.
func (s *Sources) authority(host string) []*x509.Certificate {
	if s == nil {
		return nil
	}
	return s.SourceAuthorities[host]
}

// wireSources is the YAML document. proxies is accepted, as Kubewarden
// accepts it, but proxies come from HTTPS_PROXY, HTTP_PROXY and NO_PROXY.
type wireSources struct {
	InsecureSources   []string                   `json:"insecure_sources"`
	SourceAuthorities map[string][]wireAuthority `json:"source_authorities"`
	Proxies           json.RawMessage            `json:"proxies"`
}

type wireAuthority struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Data string `json:"data"`
}

// ReadSources reads a sources file; see Sources for the format.
func ReadSources(path string) (*Sources, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read sources file: %w", err)
	}
	s, err := ParseSources(data)
	if err != nil {
		return nil, fmt.Errorf("sources file %s: %w", path, err)
	}
	return s, nil
}

// ParseSources parses a sources document (YAML or JSON). Unknown keys are
// errors, so a misspelt insecure_sources does not silently trust nothing.
func ParseSources(data []byte) (*Sources, error) {
	var w wireSources
	if err := yaml.UnmarshalStrict(data, &w); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	s := &Sources{SourceAuthorities: map[string][]*x509.Certificate{}}
	var errs []error
	for i, h := range w.InsecureSources {
		if h == "" {
			errs = append(errs, fmt.Errorf("insecure_sources[%d]: empty host", i))
			continue
		}
		s.InsecureSources = append(s.InsecureSources, h)
	}
	hosts := make([]string, 0, len(w.SourceAuthorities))
	for h := range w.SourceAuthorities {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		var pool []*x509.Certificate
		for i, a := range w.SourceAuthorities[h] {
			field := fmt.Sprintf("source_authorities[%q][%d]", h, i)
			var raw []byte
			switch a.Type {
			case "Path":
				if a.Path == "" || a.Data != "" {
					errs = append(errs, fmt.Errorf("%s: type Path needs path and no data", field))
					continue
				}
				b, err := os.ReadFile(a.Path)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s.path: %w", field, err))
					continue
				}
				raw = b
			case "Data":
				if a.Data == "" || a.Path != "" {
					errs = append(errs, fmt.Errorf("%s: type Data needs data and no path", field))
					continue
				}
				raw = []byte(a.Data)
			default:
				errs = append(errs, fmt.Errorf("%s.type: %q is neither Path nor Data", field, a.Type))
				continue
			}
			certs, err := parseCertificates(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", field, err))
				continue
			}
			pool = append(pool, certs...)
		}
		s.SourceAuthorities[h] = pool
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// parseCertificates reads PEM certificates, or a single DER certificate as
// Kubewarden also accepts.
func parseCertificates(raw []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := raw
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q is not a CERTIFICATE", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) > 0 {
		return certs, nil
	}
	c, err := x509.ParseCertificate(raw)
	if err != nil {
		return nil, errors.New("neither PEM certificates nor a DER certificate")
	}
	return []*x509.Certificate{c}, nil
}
