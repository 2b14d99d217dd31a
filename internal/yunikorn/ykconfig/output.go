package ykconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// JSON writes the settings as one JSON object, keys in order, indented.
func (r *Result) JSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, r.Settings, ""); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, obj []Setting, indent string) error {
	if len(obj) == 0 {
		b.WriteString("{}")
		return nil
	}
	b.WriteString("{\n")
	for i, s := range obj {
		key, _ := json.Marshal(s.Key)
		fmt.Fprintf(b, "%s  %s: ", indent, key)
		switch v := s.Value.(type) {
		case []Setting:
			if err := writeJSON(b, v, indent+"  "); err != nil {
				return err
			}
		case []string:
			if len(v) == 0 {
				b.WriteString("[]")
				break
			}
			b.WriteString("[")
			for j, p := range v {
				if j > 0 {
					b.WriteString(", ")
				}
				q, err := json.Marshal(p)
				if err != nil {
					return err
				}
				b.Write(q)
			}
			b.WriteString("]")
		case bool, string:
			q, err := json.Marshal(v)
			if err != nil {
				return err
			}
			b.Write(q)
		default:
			return fmt.Errorf("setting %s: unexpected value %T", s.Key, s.Value)
		}
		if i < len(obj)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(indent + "}")
	return nil
}

// YAML writes the settings as a YAML mapping, keys in order, each with a
// comment naming where its value comes from. header, if not empty, is a
// comment at the top.
func (r *Result) YAML(header string) ([]byte, error) {
	root := mapping(r.Settings)
	root.HeadComment = header
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Mapping is settings as a YAML mapping, as YAML writes them (for
// documents that embed them, as migrate --kubewarden does).
func Mapping(obj []Setting) *yaml.Node { return mapping(obj) }

func mapping(obj []Setting) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, s := range obj {
		k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s.Key, LineComment: "from " + s.From}
		var v *yaml.Node
		switch val := s.Value.(type) {
		case []Setting:
			v = mapping(val)
			if len(val) == 0 {
				// An empty mapping is written {}: the comment of the key
				// is lost before it, as before a flow [].
				v.Style = yaml.FlowStyle
				v.LineComment, k.LineComment = k.LineComment, ""
			}
		case []string:
			v = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			if len(val) == 0 {
				// The comment of the key is lost before a flow [].
				v.Style = yaml.FlowStyle
				v.LineComment, k.LineComment = k.LineComment, ""
			}
			for _, p := range val {
				// Double-quoted: patterns are full of characters YAML
				// gives meaning to.
				v.Content = append(v.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p, Style: yaml.DoubleQuotedStyle})
			}
		case bool:
			v = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(val)}
		case string:
			v = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: val, Style: yaml.DoubleQuotedStyle}
		}
		m.Content = append(m.Content, k, v)
	}
	return m
}

// WriteReport writes the notes, one per line: KEY: STATUS: TEXT.
func (r *Result) WriteReport(w io.Writer) error {
	for _, n := range r.Notes {
		if _, err := fmt.Fprintf(w, "%s: %s: %s\n", n.Key, n.Status, n.Text); err != nil {
			return err
		}
	}
	return nil
}
