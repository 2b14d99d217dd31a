package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/jsonindex"
)

// maxDepth bounds the nesting of documents given to [CreatePatch], so a
// hostile document cannot exhaust the stack. encoding/json uses the same
// limit.
const maxDepth = 10000

// CreatePatch returns the RFC 6902 JSON Patch (a JSON array) that turns the
// JSON document original into mutated.
//
// The patch holds only the real changes: objects are compared key by key
// (keys in sorted order, so the output is deterministic), arrays index by
// index (extra elements are added at the end, surplus ones removed from the
// end), and values of a different type or scalar value are replaced. Equal
// subtrees produce nothing, so equal documents give `[]`. Numbers are
// compared and emitted by their exact text, so large integers survive; strings
// are compared by their decoded value.
//
// Both inputs must be valid JSON. Duplicate object keys are refused where
// the documents differ, since a document with duplicate keys means different
// things to different parsers; a subtree that is the same text on both sides
// is left alone without being decoded.
//
// See https://www.rfc-editor.org/rfc/rfc6902 and
// https://www.rfc-editor.org/rfc/rfc6901 (path escaping).
func CreatePatch(original, mutated []byte) ([]byte, error) {
	ops, err := diffDocuments(context.Background(), original, mutated)
	if err != nil {
		return nil, err
	}
	return encodePatch(ops), nil
}

// diffDocuments returns the operations between two documents.
//
// It walks both documents' raw text side by side and descends only where
// they differ: a mutating policy usually changes one small corner of a
// large object (an annotation), so everything else is compared as bytes
// and never decoded. Only the values that go into the patch are decoded
// (into nodes, so they are written exactly as before), and only objects on
// the path to a difference are checked for duplicate keys: a subtree that
// is byte for byte the same on both sides came from the original request,
// which the API server serialised, and the patch does not touch it.
//
// The diff stops with ctx's error once ctx is done.
func diffDocuments(ctx context.Context, original, mutated []byte) ([]patchOp, error) {
	// On failure the error is parseDocument's, which names where.
	a := index(original, maxDepth)
	if a == nil {
		return nil, fmt.Errorf("decode original document: %w", invalidError(original))
	}
	b := index(mutated, maxDepth)
	if b == nil {
		return nil, fmt.Errorf("decode mutated document: %w", invalidError(mutated))
	}
	return diffValid(ctx, original, mutated, a, b)
}

// diffValid is diffDocuments for two documents known to be valid JSON no
// deeper than maxDepth: parts of documents validated as they were parsed,
// whose indexes (which may be nil) are da and db.
func diffValid(ctx context.Context, original, mutated []byte, da, db *scanned) ([]patchOp, error) {
	d := differ{ctx: ctx, docs: [2]*scanned{da, db}}
	if err := d.diff("", rawResult(original), rawResult(mutated)); err != nil {
		return nil, err
	}
	return d.ops, nil
}

// invalidError explains why data is not valid JSON, in the words of
// parseDocument (the decoder's), which json.Valid does not give.
func invalidError(data []byte) error {
	if _, err := parseDocument(data); err != nil {
		return err
	}
	return errors.New("invalid JSON")
}

// rawResult views data, which must be valid JSON, as a gjson value without
// copying it. Nothing that outlives the diff points into data.
func rawResult(data []byte) gjson.Result {
	return gjson.Parse(unsafe.String(unsafe.SliceData(data), len(data)))
}

// differ collects the operations of one diff.
type differ struct {
	ops []patchOp
	// ctx, if set, stops the diff when it is done.
	ctx  context.Context
	work int
	// docs are the indexed documents holding the original and the mutated
	// document (either may be nil).
	docs [2]*scanned
}

// diff appends the operations turning a into b at path.
func (d *differ) diff(path string, a, b gjson.Result) error {
	if a.Raw == b.Raw {
		return nil
	}
	ka, kb := rawKind(a), rawKind(b)
	switch {
	case ka != kb:
	case ka == kindObject:
		return d.diffObjects(path, a, b)
	case ka == kindArray:
		return d.diffArrays(path, a, b)
	case ka == kindString:
		same, err := sameString(a.Raw, b.Raw)
		if err != nil || same {
			return err
		}
	case strings.TrimSpace(a.Raw) == strings.TrimSpace(b.Raw):
		// Numbers compare by their text, as the node diff did.
		return nil
	}
	return d.add("replace", path, b)
}

// add appends an add or replace of the value v.
func (d *differ) add(op, path string, v gjson.Result) error {
	if raw := strings.TrimSpace(v.Raw); canonical(raw) {
		// Already written as writeNode would write it: taken as it is.
		d.ops = append(d.ops, patchOp{op: op, path: path, raw: raw})
		return nil
	}
	n, err := parseAt([]byte(v.Raw), path)
	if err != nil {
		return fmt.Errorf("decode mutated document: %w", err)
	}
	d.ops = append(d.ops, patchOp{op: op, path: path, value: n})
	return nil
}

// member is one member of an object being diffed: its decoded key and the
// raw text of its value (a gjson.Result is five times larger, and huge
// objects have hundreds of thousands of members).
type member struct {
	key, raw string
}

// checkEvery is how many members the differ walks between two looks at
// its context.
const checkEvery = 1 << 10

// tick counts n units of work and reports the context's error every
// checkEvery of them, so that a diff of a huge object stops at the
// request's deadline.
func (d *differ) tick(n int) error {
	d.work += n
	if d.work < checkEvery || d.ctx == nil {
		return nil
	}
	d.work = 0
	if err := d.ctx.Err(); err != nil {
		return fmt.Errorf("create patch: %w", err)
	}
	return nil
}

// diffObjects diffs two objects in time linear in their sizes. Members that
// are the same key with the same raw value at the start and at the end of
// both objects (all of them but the one annotation a policy adds, usually)
// are skipped; a key that changes is refused if it occurs twice on either
// side; the members in between are matched by key, and their operations
// come in sorted key order, so the output is deterministic.
func (d *differ) diffObjects(path string, a, b gjson.Result) error {
	// The members both sides begin with, same key and same raw value, are
	// passed in step without being collected: a policy's change is usually
	// one member deep inside, and the members before it need no more than
	// their keys (for the duplicate check below).
	ia, ib := d.docs[0].objectMembers(a.Raw), d.docs[1].objectMembers(b.Raw)
	var prefix []string
	for {
		sa, sb := ia, ib
		ka, va, _, oka := ia.Next()
		kb, vb, _, okb := ib.Next()
		if !oka || !okb || ka != kb || va != vb {
			ia, ib = sa, sb
			break
		}
		key, err := decodeKey(ka)
		if err != nil {
			return fmt.Errorf("decode original document: at %q: %w", path, err)
		}
		prefix = append(prefix, key)
		if err := d.tick(1); err != nil {
			return err
		}
	}
	am, err := d.collect(ia, path, "original")
	if err != nil {
		return err
	}
	bm, err := d.collect(ib, path, "mutated")
	if err != nil {
		return err
	}
	lo := 0
	for lo < len(am) && lo < len(bm) && am[lo] == bm[lo] {
		lo++
	}
	ha, hb := len(am), len(bm)
	for ha > lo && hb > lo && am[ha-1] == bm[hb-1] {
		ha--
		hb--
	}
	if lo == ha && lo == hb {
		return nil // the same members, laid out differently
	}
	// A key that changes must occur once on each side: with a duplicate,
	// what the patch does depends on which occurrence a reader keeps.
	// Duplicates of keys that do not change are the same on both sides and
	// untouched by the patch, whatever a reader makes of them.
	changed := make(map[string]struct{}, ha-lo+hb-lo)
	for _, m := range am[lo:ha] {
		changed[m.key] = struct{}{}
	}
	for _, m := range bm[lo:hb] {
		changed[m.key] = struct{}{}
	}
	for _, k := range prefix {
		if _, ok := changed[k]; ok {
			// Its second occurrence is among the rest of one side.
			side := "mutated"
			if slices.ContainsFunc(am, func(m member) bool { return m.key == k }) {
				side = "original"
			}
			return fmt.Errorf("decode %s document: at %q: duplicate key %q", side, path, k)
		}
	}
	if err := d.refuseDuplicates(am, changed, path, "original"); err != nil {
		return err
	}
	if err := d.refuseDuplicates(bm, changed, path, "mutated"); err != nil {
		return err
	}
	// With no duplicates, a key in the middle of one side is either in the
	// middle of the other or absent from it.
	ai := make(map[string]string, ha-lo)
	for _, m := range am[lo:ha] {
		ai[m.key] = m.raw
	}
	bi := make(map[string]string, hb-lo)
	for _, m := range bm[lo:hb] {
		bi[m.key] = m.raw
	}
	keys := make([]string, 0, len(ai)+len(bi))
	for _, m := range am[lo:ha] {
		keys = append(keys, m.key)
	}
	for _, m := range bm[lo:hb] {
		if _, ok := ai[m.key]; !ok {
			keys = append(keys, m.key)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + "/" + escapePointer(k)
		av, inA := ai[k]
		bv, inB := bi[k]
		switch {
		case !inB:
			d.ops = append(d.ops, patchOp{op: "remove", path: p})
		case !inA:
			err = d.add("add", p, gjson.Parse(bv))
		default:
			err = d.diff(p, gjson.Parse(av), gjson.Parse(bv))
		}
		if err == nil {
			err = d.tick(1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// collect lists the members it has still to give, in document order,
// keys decoded.
func (d *differ) collect(it jsonindex.Members, path, side string) ([]member, error) {
	// Counted first, so that the slice is allocated once: growing it would
	// copy a huge object's members several times over.
	n := 0
	for c := it; ; n++ {
		if _, _, _, ok := c.Next(); !ok {
			break
		}
	}
	members := make([]member, 0, n)
	for {
		k, v, _, ok := it.Next()
		if !ok {
			return members, nil
		}
		key, err := decodeKey(k)
		if err != nil {
			return nil, fmt.Errorf("decode %s document: at %q: %w", side, path, err)
		}
		members = append(members, member{key: key, raw: v})
		if err := d.tick(1); err != nil {
			return nil, err
		}
	}
}

// refuseDuplicates fails if one of the keys in changed occurs twice among
// members.
func (d *differ) refuseDuplicates(members []member, changed map[string]struct{}, path, side string) error {
	seen := make(map[string]struct{}, len(changed))
	for _, m := range members {
		if _, ok := changed[m.key]; !ok {
			continue
		}
		if _, dup := seen[m.key]; dup {
			return fmt.Errorf("decode %s document: at %q: duplicate key %q", side, path, m.key)
		}
		seen[m.key] = struct{}{}
	}
	return d.tick(len(members))
}

// decodeKey returns an object key, given as its raw token, as
// encoding/json (and so the API server) reads it: escapes decoded and
// invalid UTF-8 replaced by U+FFFD, where gjson would keep the bytes. Plain
// keys, the usual case, are not copied.
func decodeKey(raw string) (string, error) {
	if strings.IndexByte(raw, '\\') < 0 && utf8.ValidString(raw) && len(raw) >= 2 {
		return raw[1 : len(raw)-1], nil
	}
	var key string
	err := json.Unmarshal([]byte(raw), &key)
	return key, err
}

func (d *differ) diffArrays(path string, a, b gjson.Result) error {
	ai, bi := a.Array(), b.Array()
	common := min(len(ai), len(bi))
	for i := range common {
		if err := d.diff(path+"/"+strconv.Itoa(i), ai[i], bi[i]); err != nil {
			return err
		}
	}
	for i := common; i < len(bi); i++ {
		if err := d.add("add", path+"/"+strconv.Itoa(i), bi[i]); err != nil {
			return err
		}
	}
	for i := len(ai) - 1; i >= common; i-- {
		d.ops = append(d.ops, patchOp{op: "remove", path: path + "/" + strconv.Itoa(i)})
	}
	return nil
}

// rawKind is the JSON type of a valid value, from its first byte.
func rawKind(v gjson.Result) valueKind {
	raw := strings.TrimLeft(v.Raw, " \t\r\n")
	if raw == "" {
		return kindNull
	}
	switch raw[0] {
	case '{':
		return kindObject
	case '[':
		return kindArray
	case '"':
		return kindString
	case 't', 'f':
		return kindBool
	case 'n':
		return kindNull
	}
	return kindNumber
}

// sameString compares two JSON strings by their decoded values.
func sameString(a, b string) (bool, error) {
	if strings.IndexByte(a, '\\') < 0 && strings.IndexByte(b, '\\') < 0 && utf8.ValidString(a) && utf8.ValidString(b) {
		return strings.TrimSpace(a) == strings.TrimSpace(b), nil
	}
	var as, bs string
	if err := json.Unmarshal([]byte(a), &as); err != nil {
		return false, fmt.Errorf("decode original document: %w", err)
	}
	if err := json.Unmarshal([]byte(b), &bs); err != nil {
		return false, fmt.Errorf("decode mutated document: %w", err)
	}
	return as == bs, nil
}

// valueKind is the JSON type of a node.
type valueKind uint8

// String names the kind as encoding/json's type errors do.
func (k valueKind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "bool"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	}
	return "object"
}

const (
	kindNull valueKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is a decoded JSON value. Unlike map[string]any it keeps numbers as
// text and object keys in document order, so emitted values look like the
// mutated document.
type node struct {
	kind valueKind
	// b holds a boolean.
	b bool
	// s holds a string or the exact text of a number.
	s string
	// items holds array elements.
	items []*node
	// keys holds object keys in document order, members their values.
	keys    []string
	members map[string]*node
}

// parseDocument decodes exactly one JSON value from data.
func parseDocument(data []byte) (*node, error) {
	return parseAt(data, "")
}

// parseAt is parseDocument for a value found at path in a larger document,
// which errors name.
func parseAt(data []byte, path string) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseValue(dec, path, strings.Count(path, "/"))
	if err != nil {
		return nil, err
	}
	// Anything but the end of input after the value is an error, as for
	// json.Unmarshal.
	if tok, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("unexpected %v after top-level value", tok)
	}
	return n, nil
}

// parseValue decodes the next value from dec; path locates it for errors.
func parseValue(dec *json.Decoder, path string, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("at %q: nesting deeper than %d", path, maxDepth)
	}
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return nil, io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case bool:
		return &node{kind: kindBool, b: t}, nil
	case json.Number:
		return &node{kind: kindNumber, s: string(t)}, nil
	case string:
		return &node{kind: kindString, s: t}, nil
	case json.Delim:
		switch t {
		case '[':
			n := &node{kind: kindArray}
			for dec.More() {
				item, err := parseValue(dec, path+"/"+strconv.Itoa(len(n.items)), depth+1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, item)
			}
			return n, closeDelim(dec)
		case '{':
			n := &node{kind: kindObject, members: map[string]*node{}}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := keyTok.(string)
				if !ok {
					// The decoder's own state machine rejects non-string keys;
					// this guards against a change there.
					return nil, fmt.Errorf("at %q: object key is %v, not a string", path, keyTok)
				}
				if _, dup := n.members[key]; dup {
					return nil, fmt.Errorf("at %q: duplicate key %q", path, key)
				}
				member, err := parseValue(dec, path+"/"+escapePointer(key), depth+1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, key)
				n.members[key] = member
			}
			return n, closeDelim(dec)
		}
	}
	return nil, fmt.Errorf("at %q: unexpected %v", path, tok)
}

// closeDelim consumes the ']' or '}' that ends the current array or object.
// The decoder checks that it matches the opening one.
func closeDelim(dec *json.Decoder) error {
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || (d != ']' && d != '}') {
		return fmt.Errorf("unexpected %v, want end of array or object", tok)
	}
	return nil
}

// patchOp is one JSON Patch operation; value is nil for "remove".
type patchOp struct {
	op    string
	path  string
	value *node
	// raw, when set, is the value's text instead of value: valid JSON that
	// writeNode would write byte for byte the same (see canonical).
	raw string
}

// canonical reports whether raw, a valid JSON value, is already in the
// form writeNode gives it, so that decoding and encoding it again would
// change nothing: no whitespace between tokens, no escapes in strings but
// \" and \\, only ASCII, and no object with more than one member (so no
// duplicate keys to refuse). The value a mutating policy adds, an
// annotation or a map holding one, is all of these.
func canonical(raw string) bool {
	inString := false
	depth, members := 0, 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c >= 0x80 {
			return false
		}
		if inString {
			switch c {
			case '\\':
				if i+1 >= len(raw) || (raw[i+1] != '"' && raw[i+1] != '\\') {
					return false
				}
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			return false
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			// A comma between members of an object: more than one member.
			// (Arrays are fine, but telling them apart needs a stack.)
			if depth > 0 {
				members++
			}
		}
	}
	return members == 0
}

// pointerEscaper escapes a reference token per RFC 6901 §3. strings.Replacer
// works in one pass, so "~1" in a key becomes "~01", not "~~1".
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes key for use in a JSON Pointer.
func escapePointer(key string) string {
	return pointerEscaper.Replace(key)
}

// encodePatch writes ops as a compact JSON array.
func encodePatch(ops []patchOp) []byte {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, op := range ops {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"op":"`)
		buf.WriteString(op.op)
		buf.WriteString(`","path":`)
		writeString(&buf, op.path)
		switch {
		case op.raw != "":
			buf.WriteString(`,"value":`)
			buf.WriteString(op.raw)
		case op.value != nil:
			buf.WriteString(`,"value":`)
			writeNode(&buf, op.value)
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	return buf.Bytes()
}

// writeNode writes n as compact JSON, numbers as their original text and
// object members in document order.
func writeNode(buf *bytes.Buffer, n *node) {
	switch n.kind {
	case kindNull:
		buf.WriteString("null")
	case kindBool:
		buf.WriteString(strconv.FormatBool(n.b))
	case kindNumber:
		buf.WriteString(n.s)
	case kindString:
		writeString(buf, n.s)
	case kindArray:
		buf.WriteByte('[')
		for i, item := range n.items {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeNode(buf, item)
		}
		buf.WriteByte(']')
	case kindObject:
		buf.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			writeNode(buf, n.members[k])
		}
		buf.WriteByte('}')
	}
}

// writeString writes s as a JSON string. Only what JSON requires is escaped
// (plus U+2028/U+2029, which encoding/json always escapes); <, > and & stay
// as they are, so annotation values read naturally in the patch.
func writeString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			buf.WriteByte('\\')
			buf.WriteRune(r)
		case r == '\n':
			buf.WriteString(`\n`)
		case r == '\r':
			buf.WriteString(`\r`)
		case r == '\t':
			buf.WriteString(`\t`)
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			buf.WriteString(`\u`)
			buf.WriteByte(hex[r>>12&0xf])
			buf.WriteByte(hex[r>>8&0xf])
			buf.WriteByte(hex[r>>4&0xf])
			buf.WriteByte(hex[r&0xf])
		default:
			// Strings come from the decoder, which has already replaced
			// invalid UTF-8 with U+FFFD, so every rune is valid here.
			buf.WriteRune(r)
		}
	}
	buf.WriteByte('"')
}
