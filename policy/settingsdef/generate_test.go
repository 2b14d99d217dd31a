package settingsdef

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the files generated from the settings description")

const (
	settingsDoc  = "docs/SETTINGS.md"
	chartSchema  = "charts/yunikorn-userinfo/values.schema.json"
	tableBegin   = "<!-- BEGIN settings table: generated from policy/settingsdef by make generate; edit there -->"
	tableEnd     = "<!-- END settings table -->"
	schemaAnchor = "\n    \"settings\": "
	regenerate   = "the settings description in policy/settingsdef changed: run make generate (or go test ./policy/settingsdef -run TestGenerated -update) and commit the result"
)

func repoPath(name string) string { return filepath.Join("..", "..", filepath.FromSlash(name)) }

// TestGenerated: the reference table and the chart schema's settings are
// what the description says. With -update it rewrites them.
func TestGenerated(t *testing.T) {
	for _, f := range []struct {
		name   string
		splice func([]byte) ([]byte, error)
	}{
		{settingsDoc, spliceTable},
		{chartSchema, spliceSchema},
	} {
		path := repoPath(f.name)
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := f.splice(old)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if bytes.Equal(old, fresh) {
			continue
		}
		if *update {
			if err := os.WriteFile(path, fresh, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s is stale: %s", f.name, regenerate)
	}
}

// Table renders the Markdown reference table.
func Table() string {
	var b strings.Builder
	b.WriteString("| key | type | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, s := range All {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.Key, s.Type, s.Default, s.Meaning)
	}
	return b.String()
}

func spliceTable(doc []byte) ([]byte, error) {
	text := string(doc)
	i := strings.Index(text, tableBegin+"\n")
	j := strings.Index(text, tableEnd)
	if i < 0 || j < i {
		return nil, fmt.Errorf("the markers %q and %q are missing or out of order", tableBegin, tableEnd)
	}
	i += len(tableBegin) + 1
	return []byte(text[:i] + Table() + text[j:]), nil
}

// SchemaJSON renders the chart schema's settings object (compact).
func SchemaJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","additionalProperties":false,"properties":{`)
	first := true
	for _, s := range All {
		if s.Schema == "" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		key, _ := json.Marshal(s.Key)
		b.Write(key)
		b.WriteByte(':')
		if err := json.Compact(&b, []byte(s.Schema)); err != nil {
			return nil, fmt.Errorf("settingsdef %s: Schema is not JSON: %w", s.Key, err)
		}
	}
	b.WriteString("}}")
	return b.Bytes(), nil
}

// spliceSchema replaces the value of properties.settings, which starts at
// schemaAnchor (two levels deep, as the file is indented) and ends at its
// matching brace.
func spliceSchema(doc []byte) ([]byte, error) {
	text := string(doc)
	i := strings.Index(text, schemaAnchor)
	if i < 0 || strings.Count(text, schemaAnchor) != 1 {
		return nil, fmt.Errorf("want exactly one %q", strings.TrimSpace(schemaAnchor))
	}
	start := i + len(schemaAnchor)
	end, err := matchingBrace(text, start)
	if err != nil {
		return nil, err
	}
	compact, err := SchemaJSON()
	if err != nil {
		return nil, err
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, compact, "    ", "  "); err != nil {
		return nil, err
	}
	out := text[:start] + ind.String() + text[end:]
	if !json.Valid([]byte(out)) {
		return nil, fmt.Errorf("the spliced schema is not JSON")
	}
	return []byte(out), nil
}

// matchingBrace returns the offset just past the object that starts at
// text[start], skipping braces inside strings.
func matchingBrace(text string, start int) (int, error) {
	if start >= len(text) || text[start] != '{' {
		return 0, fmt.Errorf("settings is not an object")
	}
	depth, inString := 0, false
	for k := start; k < len(text); k++ {
		c := text[k]
		switch {
		case inString && c == '\\':
			k++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return k + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("settings object is not closed")
}

// TestAll_wellFormed: keys unique, every column filled, every Example and
// Schema JSON.
func TestAll_wellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All {
		if s.Key == "" || seen[s.Key] {
			t.Errorf("key %q: empty or duplicate", s.Key)
		}
		seen[s.Key] = true
		if s.Type == "" || s.Default == "" || s.Meaning == "" {
			t.Errorf("%s: Type, Default and Meaning are the reference table's columns: fill them", s.Key)
		}
		if strings.Contains(s.Type+s.Default+s.Meaning, "\n") {
			t.Errorf("%s: a table cell cannot span lines", s.Key)
		}
		if !json.Valid([]byte(s.Example)) {
			t.Errorf("%s: Example is not JSON: %s", s.Key, s.Example)
		}
		if s.Schema != "" && !json.Valid([]byte(s.Schema)) {
			t.Errorf("%s: Schema is not JSON", s.Key)
		}
	}
}
