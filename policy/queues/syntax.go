package queues

import (
	"strconv"
	"unicode/utf8"
)

// A YAML syntax check that runs before yaml.v3 and never panics.
//
// yaml.v3 reports a syntax error by panicking inside its parser and
// recovering at its API. TinyGo's WebAssembly has no recover, so in the
// module that panic traps the guest, and with it every evaluation that
// reads the text. checkSyntax models the part of yaml.v3 that Unmarshal
// runs for a text (its reader, scanner and parser, up to the end of the
// first document) closely enough to tell three cases apart:
//
//   - syntaxOK: yaml.v3 parses the text without error, so calling it is
//     safe;
//   - syntaxBad: yaml.v3 refuses the text; the error is its own, worded
//     as it words it ("yaml: line 3: mapping values are not allowed in
//     this context"), line numbers included;
//   - syntaxUnknown: the text uses YAML this check does not model (tags,
//     directives, explicit "?" keys, UTF-16, nesting past 1000 levels);
//     it is not handed to yaml.v3.
//
// The model is written from the YAML 1.1 rules as libyaml (and so
// yaml.v3) applies them: simple keys at most one line and 1024 characters
// long, indentation that opens and closes block collections, tabs only
// where a token cannot start, and yaml.v3's quirks (the 0-based line of a
// parser error, the scanner's look-ahead of three tokens). Its fidelity is
// tested against yaml.v3 itself on mutated texts (syntax_test.go), and in
// the built module (host/conformance).

type syntaxVerdict int

const (
	syntaxOK syntaxVerdict = iota
	syntaxBad
	syntaxUnknown
)

// SyntaxError is a YAML syntax error as yaml.v3 reports it.
type SyntaxError struct {
	Line    int // 1-based as yaml.v3 counts it; 0 when it names none
	Problem string
}

func (e *SyntaxError) Error() string {
	if e.Line > 0 {
		return "yaml: line " + strconv.Itoa(e.Line) + ": " + e.Problem
	}
	return "yaml: " + e.Problem
}

// UncheckedError is a text whose YAML the module does not parse, because
// it uses a construct the syntax check does not model (and yaml.v3 would
// trap the module if the text had a syntax error there).
type UncheckedError struct {
	Line      int // 1-based
	Construct string
}

func (e *UncheckedError) Error() string {
	return "the module does not parse YAML with " + e.Construct + " (line " + strconv.Itoa(e.Line) + ")"
}

// maxSyntaxNesting bounds flow and block nesting; yaml.v3 refuses more than
// 10000 levels, the check gives up well before.
const maxSyntaxNesting = 1000

type mark struct{ index, line, col int }

type tokenType int

const (
	tStreamStart tokenType = iota
	tStreamEnd
	tDocStart
	tDocEnd
	tBlockSeqStart
	tBlockMapStart
	tBlockEnd
	tFlowSeqStart
	tFlowSeqEnd
	tFlowMapStart
	tFlowMapEnd
	tBlockEntry
	tFlowEntry
	tKey
	tValue
	tAlias
	tAnchor
	tScalar
)

type token struct {
	typ   tokenType
	start mark
	value string // anchor and alias names
}

type simpleKey struct {
	possible, required bool
	number             int
	m                  mark
}

type syntaxScanner struct {
	r        []rune
	m        mark // position of r[m.index]
	newlines int  // line breaks skipped since the last non-blank

	started bool
	flow    int
	indent  int
	indents []int
	allowed bool // a simple key may start here
	keys    []simpleKey
	tokens  []token
	head    int
	parsed  int // tokens the parser has taken
	avail   bool
	err     *SyntaxError
	unknown *UncheckedError

	maxPeek  int  // the furthest index looked at
	docEnded bool // the first document ended before the stream did
}

func (s *syntaxScanner) at(k int) rune {
	i := s.m.index + k
	s.maxPeek = max(s.maxPeek, i)
	if i < len(s.r) {
		return s.r[i]
	}
	return 0
}

func isBlank(c rune) bool  { return c == ' ' || c == '\t' }
func isBreak(c rune) bool  { return c == '\n' }
func isBlankz(c rune) bool { return c == ' ' || c == '\t' || c == '\n' || c == 0 }
func isAlpha(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c == '-'
}
func isHex(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' || c >= 'a' && c <= 'f'
}

func (s *syntaxScanner) skip() {
	if !isBlank(s.at(0)) {
		s.newlines = 0
	}
	s.m.index++
	s.m.col++
}

func (s *syntaxScanner) skipLine() {
	s.m.index++
	s.m.col = 0
	s.m.line++
	s.newlines++
}

// scanError records a scanner error: yaml.v3 names the line of the
// context mark, else of the problem mark, 1-based, and none on line 1.
func (s *syntaxScanner) scanError(ctx mark, problem string) bool {
	line := 0
	if ctx.line != 0 {
		line = ctx.line + 1
	} else if s.m.line != 0 {
		line = s.m.line + 1
	}
	s.err = &SyntaxError{Line: line, Problem: problem}
	return false
}

func (s *syntaxScanner) giveUp(construct string) bool {
	s.unknown = &UncheckedError{Line: s.m.line + 1, Construct: construct}
	return false
}

func (s *syntaxScanner) insert(at int, t token) {
	if at < 0 {
		s.tokens = append(s.tokens, t)
		return
	}
	i := s.head + at
	s.tokens = append(s.tokens, token{})
	copy(s.tokens[i+1:], s.tokens[i:])
	s.tokens[i] = t
}

func (s *syntaxScanner) add(typ tokenType, start mark) {
	s.insert(-1, token{typ: typ, start: start})
}

func (s *syntaxScanner) queued() int { return s.parsed + len(s.tokens) - s.head }

func (s *syntaxScanner) keyValid(k *simpleKey) (valid, ok bool) {
	if !k.possible {
		return false, true
	}
	if k.m.line < s.m.line || k.m.index+1024 < s.m.index {
		if k.required {
			return false, s.scanError(k.m, "could not find expected ':'")
		}
		k.possible = false
		return false, true
	}
	return true, true
}

func (s *syntaxScanner) saveKey() bool {
	if !s.allowed {
		return true
	}
	k := simpleKey{possible: true, required: s.flow == 0 && s.indent == s.m.col, number: s.queued(), m: s.m}
	if !s.removeKey() {
		return false
	}
	s.keys[len(s.keys)-1] = k
	return true
}

func (s *syntaxScanner) removeKey() bool {
	k := &s.keys[len(s.keys)-1]
	if k.possible {
		if k.required {
			return s.scanError(k.m, "could not find expected ':'")
		}
		k.possible = false
	}
	return true
}

func (s *syntaxScanner) rollIndent(col, number int, typ tokenType, m mark) bool {
	if s.flow > 0 || s.indent >= col {
		return true
	}
	s.indents = append(s.indents, s.indent)
	s.indent = col
	if len(s.indents) > maxSyntaxNesting {
		return s.giveUp("more than 1000 nested collections")
	}
	if number > -1 {
		number -= s.parsed
	}
	s.insert(number, token{typ: typ, start: m})
	return true
}

func (s *syntaxScanner) unrollIndent(col int, at mark) {
	if s.flow > 0 {
		return
	}
	for s.indent > col {
		s.add(tBlockEnd, at)
		s.indent = s.indents[len(s.indents)-1]
		s.indents = s.indents[:len(s.indents)-1]
	}
}

// fetchMore scans tokens until the parser may take the head one: three
// tokens ahead, and past a simple key that may still turn out to be one.
func (s *syntaxScanner) fetchMore() bool {
	for {
		if s.head < len(s.tokens)-2 {
			var k *simpleKey
			for i := range s.keys {
				if s.keys[i].possible && s.keys[i].number == s.parsed {
					k = &s.keys[i]
				}
			}
			if k == nil {
				break
			}
			valid, ok := s.keyValid(k)
			if !ok {
				return false
			}
			if !valid {
				break
			}
		}
		if !s.fetchNext() {
			return false
		}
	}
	s.avail = true
	return true
}

func (s *syntaxScanner) peek() (*token, bool) {
	if !s.avail && !s.fetchMore() {
		return nil, false
	}
	return &s.tokens[s.head], true
}

func (s *syntaxScanner) take() {
	s.avail = false
	s.parsed++
	s.head++
	if s.head >= 64 && 2*s.head >= len(s.tokens) {
		// Tokens taken are not needed again: keep the queue short.
		s.tokens = s.tokens[:copy(s.tokens, s.tokens[s.head:])]
		s.head = 0
	}
}

func (s *syntaxScanner) docIndicator() bool {
	c := s.at(0)
	return s.m.col == 0 && (c == '-' || c == '.') && s.at(1) == c && s.at(2) == c && isBlankz(s.at(3))
}

func (s *syntaxScanner) fetchNext() bool {
	if !s.started {
		s.started = true
		s.indent = -1
		s.keys = append(s.keys, simpleKey{})
		s.allowed = true
		s.add(tStreamStart, s.m)
		return true
	}
	scanMark := s.m
	if !s.scanToNext() {
		return false
	}
	s.unrollIndent(s.m.col, scanMark)
	c := s.at(0)
	switch {
	case s.m.index >= len(s.r):
		return s.fetchStreamEnd()
	case s.m.col == 0 && c == '%':
		return s.giveUp("a directive")
	case s.docIndicator():
		typ := tDocStart
		if c == '.' {
			typ = tDocEnd
		}
		s.unrollIndent(-1, s.m)
		if !s.removeKey() {
			return false
		}
		s.allowed = false
		start := s.m
		s.skip()
		s.skip()
		s.skip()
		s.add(typ, start)
		return true
	}
	ok := s.fetchToken(c)
	if ok && s.tokens[len(s.tokens)-1].typ != tBlockEntry {
		s.lineComment()
	}
	return ok
}

func (s *syntaxScanner) fetchToken(c rune) bool {
	next := s.at(1)
	switch {
	case c == '[' || c == '{':
		if !s.saveKey() {
			return false
		}
		s.keys = append(s.keys, simpleKey{number: s.queued(), m: s.m})
		s.flow++
		if s.flow > maxSyntaxNesting {
			return s.giveUp("more than 1000 nested collections")
		}
		s.allowed = true
		typ := tFlowSeqStart
		if c == '{' {
			typ = tFlowMapStart
		}
		return s.simple(typ)
	case c == ']' || c == '}':
		if !s.removeKey() {
			return false
		}
		if s.flow > 0 {
			s.flow--
			s.keys = s.keys[:len(s.keys)-1]
		}
		s.allowed = false
		typ := tFlowSeqEnd
		if c == '}' {
			typ = tFlowMapEnd
		}
		return s.simple(typ)
	case c == ',':
		if !s.removeKey() {
			return false
		}
		s.allowed = true
		return s.simple(tFlowEntry)
	case c == '-' && isBlankz(next):
		if s.flow == 0 {
			if !s.allowed {
				return s.scanError(s.m, "block sequence entries are not allowed in this context")
			}
			if !s.rollIndent(s.m.col, -1, tBlockSeqStart, s.m) {
				return false
			}
		}
		if !s.removeKey() {
			return false
		}
		s.allowed = true
		return s.simple(tBlockEntry)
	case c == '?' && (s.flow > 0 || isBlankz(next)):
		return s.giveUp("an explicit '?' key")
	case c == ':' && (s.flow > 0 || isBlankz(next)):
		return s.fetchValue()
	case c == '*' || c == '&':
		if !s.saveKey() {
			return false
		}
		s.allowed = false
		return s.scanAnchor(c == '*')
	case c == '!':
		return s.giveUp("a tag")
	case (c == '|' || c == '>') && s.flow == 0:
		if !s.removeKey() {
			return false
		}
		s.allowed = true
		return s.scanBlock()
	case c == '\'' || c == '"':
		if !s.saveKey() {
			return false
		}
		s.allowed = false
		return s.scanQuoted(c == '\'')
	case !isBlankz(c) && !isIndicator(c),
		c == '-' && !isBlank(next),
		s.flow == 0 && (c == '?' || c == ':') && !isBlankz(next):
		if !s.saveKey() {
			return false
		}
		s.allowed = false
		return s.scanPlain()
	}
	return s.scanError(s.m, "found character that cannot start any token")
}

func isIndicator(c rune) bool {
	switch c {
	case '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return true
	}
	return false
}

// simple adds a one-character token.
func (s *syntaxScanner) simple(typ tokenType) bool {
	start := s.m
	s.skip()
	s.add(typ, start)
	return true
}

func (s *syntaxScanner) fetchValue() bool {
	k := &s.keys[len(s.keys)-1]
	valid, ok := s.keyValid(k)
	if !ok {
		return false
	}
	if valid {
		s.insert(k.number-s.parsed, token{typ: tKey, start: k.m})
		if !s.rollIndent(k.m.col, k.number, tBlockMapStart, k.m) {
			return false
		}
		k.possible = false
		s.allowed = false
	} else {
		if s.flow == 0 {
			if !s.allowed {
				return s.scanError(s.m, "mapping values are not allowed in this context")
			}
			if !s.rollIndent(s.m.col, -1, tBlockMapStart, s.m) {
				return false
			}
		}
		s.allowed = s.flow == 0
	}
	return s.simple(tValue)
}

func (s *syntaxScanner) fetchStreamEnd() bool {
	if s.m.col != 0 {
		s.m.col = 0
		s.m.line++
	}
	s.unrollIndent(-1, s.m)
	if !s.removeKey() {
		return false
	}
	s.allowed = false
	s.add(tStreamEnd, s.m)
	return true
}

// scanToNext skips blanks, comments and line breaks up to the next token.
// Tabs are skipped only where a simple key cannot start (inside flow
// collections, after a block indicator on the same line).
func (s *syntaxScanner) scanToNext() bool {
	for {
		for s.at(0) == ' ' || ((s.flow > 0 || !s.allowed) && s.at(0) == '\t') {
			s.skip()
		}
		if s.at(0) == '#' {
			s.comments()
		}
		if !isBreak(s.at(0)) {
			return true
		}
		s.skipLine()
		if s.flow == 0 {
			s.allowed = true
		}
	}
}

// toBreak skips to the end of the line.
func (s *syntaxScanner) toBreak() {
	for c := s.at(0); !isBreak(c) && s.m.index < len(s.r); c = s.at(0) {
		s.skip()
	}
}

// comments skips the comment at the position and, as yaml.v3 does when
// it gathers a comment block, the comments on the lines that follow with
// the blanks (tabs too) and empty lines before them, looking at most 512
// characters ahead for the next '#'.
func (s *syntaxScanner) comments() {
	s.toBreak()
	for {
		p := 0
		for ; p < 512; p++ {
			c := s.at(p)
			if isBlank(c) || isBreak(c) {
				continue
			}
			break
		}
		if p == 512 || s.at(p) != '#' || s.m.index+p >= len(s.r) {
			return
		}
		// a ']' or '}' in a flow collection ends the look-ahead too; it
		// is not a '#', so the test above covers it.
		for ; p > 0; p-- {
			if isBreak(s.at(0)) {
				s.skipLine()
			} else {
				s.skip()
			}
		}
		s.toBreak()
	}
}

// lineComment skips a comment after a token on the same line, blanks
// (tabs too) before it, unless a line break was skipped since the token.
func (s *syntaxScanner) lineComment() {
	if s.newlines > 0 {
		return
	}
	for p := 0; p < 512; p++ {
		c := s.at(p)
		if isBlank(c) {
			continue
		}
		if c == '#' && s.m.index+p < len(s.r) {
			for ; p > 0; p-- {
				s.skip()
			}
			s.toBreak()
		}
		return
	}
}

func (s *syntaxScanner) scanAnchor(alias bool) bool {
	start := s.m
	s.skip()
	from := s.m.index
	for isAlpha(s.at(0)) {
		s.skip()
	}
	name := string(s.r[from:s.m.index])
	c := s.at(0)
	if name == "" || !(isBlankz(c) || c == '?' || c == ':' || c == ',' || c == ']' || c == '}' || c == '%' || c == '@' || c == '`') {
		return s.scanError(start, "did not find expected alphabetic or numeric character")
	}
	typ := tAnchor
	if alias {
		typ = tAlias
	}
	s.insert(-1, token{typ: typ, start: start, value: name})
	return true
}

func (s *syntaxScanner) scanQuoted(single bool) bool {
	start := s.m
	s.skip()
	for {
		if s.docIndicator() {
			return s.scanError(start, "found unexpected document indicator")
		}
		if s.m.index >= len(s.r) {
			return s.scanError(start, "found unexpected end of stream")
		}
		for c := s.at(0); !isBlankz(c); c = s.at(0) {
			if single && c == '\'' && s.at(1) == '\'' {
				s.skip()
				s.skip()
				continue
			}
			if single && c == '\'' || !single && c == '"' {
				break
			}
			if !single && c == '\\' && isBreak(s.at(1)) {
				s.skip()
				s.skipLine()
				break
			}
			if !single && c == '\\' {
				n := 0
				switch s.at(1) {
				case '0', 'a', 'b', 't', '\t', 'n', 'v', 'f', 'r', 'e', ' ', '"', '\'', '\\', 'N', '_', 'L', 'P':
				case 'x':
					n = 2
				case 'u':
					n = 4
				case 'U':
					n = 8
				default:
					return s.scanError(start, "found unknown escape character")
				}
				s.skip()
				s.skip()
				v := 0
				for k := 0; k < n; k++ {
					h := s.at(k)
					if !isHex(h) {
						return s.scanError(start, "did not find expected hexdecimal number")
					}
					d, _ := strconv.ParseUint(string(h), 16, 8)
					v = v<<4 + int(d)
				}
				if v >= 0xD800 && v <= 0xDFFF || v > 0x10FFFF {
					return s.scanError(start, "found invalid Unicode character escape code")
				}
				for k := 0; k < n; k++ {
					s.skip()
				}
				continue
			}
			s.skip()
		}
		c := s.at(0)
		if single && c == '\'' || !single && c == '"' {
			break
		}
		for c := s.at(0); isBlank(c) || isBreak(c); c = s.at(0) {
			if isBlank(c) {
				s.skip()
			} else {
				s.skipLine()
			}
		}
	}
	s.skip()
	s.add(tScalar, start)
	return true
}

// scanBlock scans a literal (|) or folded (>) block scalar: its header
// (chomping, an indentation indicator 1-9, a comment), then every line
// indented at least as far as the first (or the indicator says).
func (s *syntaxScanner) scanBlock() bool {
	start := s.m
	s.skip()
	increment := 0
	digit := func() bool {
		if d := s.at(0); d >= '0' && d <= '9' {
			if d == '0' {
				return s.scanError(start, "found an indentation indicator equal to 0")
			}
			increment = int(d - '0')
			s.skip()
		}
		return true
	}
	switch c := s.at(0); {
	case c == '+' || c == '-':
		s.skip()
		if !digit() {
			return false
		}
	case c >= '0' && c <= '9':
		if !digit() {
			return false
		}
		if c := s.at(0); c == '+' || c == '-' {
			s.skip()
		}
	}
	for isBlank(s.at(0)) {
		s.skip()
	}
	if s.at(0) == '#' {
		s.toBreak()
	}
	if !isBlankz(s.at(0)) || isBlank(s.at(0)) {
		return s.scanError(start, "did not find expected comment or line break")
	}
	if isBreak(s.at(0)) {
		s.skipLine()
	}
	indent := 0
	if increment > 0 {
		indent = increment
		if s.indent >= 0 {
			indent = s.indent + increment
		}
	}
	if !s.blockBreaks(&indent, start) {
		return false
	}
	for s.m.col == indent && s.m.index < len(s.r) {
		s.toBreak()
		if isBreak(s.at(0)) {
			s.skipLine()
		}
		if !s.blockBreaks(&indent, start) {
			return false
		}
	}
	s.add(tScalar, start)
	return true
}

// blockBreaks skips the indentation and the empty lines of a block
// scalar; with no indentation known yet, the first content line's sets it.
func (s *syntaxScanner) blockBreaks(indent *int, start mark) bool {
	most := 0
	for {
		for (*indent == 0 || s.m.col < *indent) && s.at(0) == ' ' {
			s.skip()
		}
		most = max(most, s.m.col)
		if (*indent == 0 || s.m.col < *indent) && s.at(0) == '\t' {
			return s.scanError(start, "found a tab character where an indentation space is expected")
		}
		if !isBreak(s.at(0)) {
			break
		}
		s.skipLine()
	}
	if *indent == 0 {
		*indent = max(most, s.indent+1, 1)
	}
	return true
}

func (s *syntaxScanner) scanPlain() bool {
	start := s.m
	indent := s.indent + 1
	leading := false
	for {
		if s.docIndicator() || s.at(0) == '#' {
			break
		}
		for c := s.at(0); !isBlankz(c); c = s.at(0) {
			if c == ':' && isBlankz(s.at(1)) || s.flow > 0 && (c == ',' || c == '?' || c == '[' || c == ']' || c == '{' || c == '}') {
				break
			}
			leading = false
			s.skip()
		}
		if c := s.at(0); !isBlank(c) && !isBreak(c) {
			break
		}
		for c := s.at(0); isBlank(c) || isBreak(c); c = s.at(0) {
			if isBlank(c) {
				if leading && s.m.col < indent && c == '\t' {
					return s.scanError(start, "found a tab character that violates indentation")
				}
				s.skip()
			} else {
				s.skipLine()
				leading = true
			}
		}
		if s.flow == 0 && s.m.col < indent {
			break
		}
	}
	s.add(tScalar, start)
	if leading {
		s.allowed = true
	}
	return true
}

// readText decodes data as yaml.v3's reader does: UTF-8 (a leading byte
// order mark skipped), printable characters only. Line breaks are made
// "\n" (a "\r\n" counts as one break there too).
// at is the offset in data of a reader error.
func readText(data []byte) (r []rune, err *SyntaxError, unknown *UncheckedError, at int) {
	if len(data) >= 2 && (data[0] == 0xFE && data[1] == 0xFF || data[0] == 0xFF && data[1] == 0xFE) {
		return nil, nil, &UncheckedError{Line: 1, Construct: "UTF-16 text"}, 0
	}
	bom := 0
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		data, bom = data[3:], 3
	}
	out := make([]rune, 0, len(data))
	line := 1
	for i := 0; i < len(data); {
		b := data[i]
		width := 0
		switch {
		case b&0x80 == 0:
			width = 1
		case b&0xE0 == 0xC0:
			width = 2
		case b&0xF0 == 0xE0:
			width = 3
		case b&0xF8 == 0xF0:
			width = 4
		default:
			return nil, &SyntaxError{Problem: "invalid leading UTF-8 octet"}, nil, i + bom
		}
		if i+width > len(data) {
			return nil, &SyntaxError{Problem: "incomplete UTF-8 octet sequence"}, nil, i + bom
		}
		v := rune(b)
		if width > 1 {
			v = rune(b) & (0x7F >> width)
			for k := 1; k < width; k++ {
				if data[i+k]&0xC0 != 0x80 {
					return nil, &SyntaxError{Problem: "invalid trailing UTF-8 octet"}, nil, i + bom
				}
				v = v<<6 | rune(data[i+k]&0x3F)
			}
			if width == 2 && v < 0x80 || width == 3 && v < 0x800 || width == 4 && v < 0x10000 {
				return nil, &SyntaxError{Problem: "invalid length of a UTF-8 sequence"}, nil, i + bom
			}
			if v >= 0xD800 && v <= 0xDFFF || v > 0x10FFFF {
				return nil, &SyntaxError{Problem: "invalid Unicode character"}, nil, i + bom
			}
		}
		switch {
		case v == 0x09, v == 0x0A, v == 0x0D, v >= 0x20 && v <= 0x7E, v == 0x85,
			v >= 0xA0 && v <= 0xD7FF, v >= 0xE000 && v <= 0xFFFD, v >= 0x10000 && v <= 0x10FFFF:
		default:
			return nil, &SyntaxError{Problem: "control characters are not allowed"}, nil, i + bom
		}
		i += width
		switch v {
		case 0x85, 0x2028, 0x2029:
			return nil, nil, &UncheckedError{Line: line, Construct: "a Unicode line separator"}, 0
		case 0xFEFF:
			return nil, nil, &UncheckedError{Line: line, Construct: "a byte order mark inside the text"}, 0
		case '\r':
			if i < len(data) && data[i] == '\n' {
				i++
			}
			v = '\n'
		}
		if v == '\n' {
			line++
		}
		out = append(out, v)
	}
	return out, nil, nil, 0
}

type parseState int

const (
	psStreamStart parseState = iota
	psImplicitDocStart
	psDocStart
	psDocContent
	psDocEnd
	psBlockNode
	psBlockNodeOrIndentless
	psFlowNode
	psBlockSeqFirst
	psBlockSeqEntry
	psIndentlessSeqEntry
	psBlockMapFirstKey
	psBlockMapKey
	psBlockMapValue
	psFlowSeqFirst
	psFlowSeqEntry
	psFlowSeqEntryMapKey
	psFlowSeqEntryMapValue
	psFlowSeqEntryMapEnd
	psFlowMapFirstKey
	psFlowMapKey
	psFlowMapValue
	psFlowMapEmptyValue
	psEnd
)

type eventType int

const (
	eNone eventType = iota
	eStreamStart
	eStreamEnd
	eDocStart
	eDocEnd
	eAlias
	eScalar
	eSeqStart
	eSeqEnd
	eMapStart
	eMapEnd
)

type event struct {
	typ    eventType
	anchor string // of a node; the name an alias refers to
}

// syntaxParser is libyaml's parser state machine over the scanner's tokens.
type syntaxParser struct {
	s      *syntaxScanner
	state  parseState
	states []parseState
	marks  []mark
}

// parseError records a parser error: yaml.v3 names the 0-based line of the
// context mark, else of the problem mark, and none when that is 0.
func (p *syntaxParser) parseError(ctx mark, hasCtx bool, problem string, at mark) (event, bool) {
	line := at.line
	if hasCtx && ctx.line != 0 {
		line = ctx.line
	}
	p.s.err = &SyntaxError{Line: line, Problem: problem}
	return event{}, false
}

func (p *syntaxParser) pop() {
	p.state = p.states[len(p.states)-1]
	p.states = p.states[:len(p.states)-1]
}

func (p *syntaxParser) popMark() mark {
	m := p.marks[len(p.marks)-1]
	p.marks = p.marks[:len(p.marks)-1]
	return m
}

func (p *syntaxParser) next() (event, bool) {
	s := p.s
	t, ok := s.peek()
	if !ok {
		return event{}, false
	}
	switch p.state {
	case psStreamStart:
		p.state = psImplicitDocStart
		s.take()
		return event{typ: eStreamStart}, true
	case psImplicitDocStart, psDocStart:
		if p.state == psDocStart {
			for t.typ == tDocEnd {
				s.take()
				if t, ok = s.peek(); !ok {
					return event{}, false
				}
			}
		}
		if p.state == psImplicitDocStart && t.typ != tDocStart && t.typ != tStreamEnd {
			p.states = append(p.states, psDocEnd)
			p.state = psBlockNode
			return event{typ: eDocStart}, true
		}
		if t.typ != tStreamEnd {
			if t.typ != tDocStart {
				return p.parseError(mark{}, false, "did not find expected <document start>", t.start)
			}
			p.states = append(p.states, psDocEnd)
			p.state = psDocContent
			s.take()
			return event{typ: eDocStart}, true
		}
		p.state = psEnd
		s.take()
		return event{typ: eStreamEnd}, true
	case psDocContent:
		switch t.typ {
		case tDocStart, tDocEnd, tStreamEnd:
			p.pop()
			return event{typ: eScalar}, true
		}
		return p.node(true, false)
	case psDocEnd:
		if t.typ == tDocEnd {
			s.take()
		}
		p.state = psDocStart
		return event{typ: eDocEnd}, true
	case psBlockNode:
		return p.node(true, false)
	case psBlockNodeOrIndentless:
		return p.node(true, true)
	case psFlowNode:
		return p.node(false, false)
	case psBlockSeqFirst, psBlockSeqEntry:
		if p.state == psBlockSeqFirst {
			p.marks = append(p.marks, t.start)
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
		}
		switch t.typ {
		case tBlockEntry:
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
			if t.typ != tBlockEntry && t.typ != tBlockEnd {
				p.states = append(p.states, psBlockSeqEntry)
				return p.node(true, false)
			}
			p.state = psBlockSeqEntry
			return event{typ: eScalar}, true
		case tBlockEnd:
			p.pop()
			p.popMark()
			s.take()
			return event{typ: eSeqEnd}, true
		}
		return p.parseError(p.popMark(), true, "did not find expected '-' indicator", t.start)
	case psIndentlessSeqEntry:
		if t.typ == tBlockEntry {
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
			if t.typ != tBlockEntry && t.typ != tKey && t.typ != tValue && t.typ != tBlockEnd {
				p.states = append(p.states, psIndentlessSeqEntry)
				return p.node(true, false)
			}
			p.state = psIndentlessSeqEntry
			return event{typ: eScalar}, true
		}
		p.pop()
		return event{typ: eSeqEnd}, true
	case psBlockMapFirstKey, psBlockMapKey:
		if p.state == psBlockMapFirstKey {
			p.marks = append(p.marks, t.start)
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
		}
		switch t.typ {
		case tKey:
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
			if t.typ != tKey && t.typ != tValue && t.typ != tBlockEnd {
				p.states = append(p.states, psBlockMapValue)
				return p.node(true, true)
			}
			p.state = psBlockMapValue
			return event{typ: eScalar}, true
		case tBlockEnd:
			p.pop()
			p.popMark()
			s.take()
			return event{typ: eMapEnd}, true
		}
		return p.parseError(p.popMark(), true, "did not find expected key", t.start)
	case psBlockMapValue:
		if t.typ == tValue {
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
			if t.typ != tKey && t.typ != tValue && t.typ != tBlockEnd {
				p.states = append(p.states, psBlockMapKey)
				return p.node(true, true)
			}
		}
		p.state = psBlockMapKey
		return event{typ: eScalar}, true
	case psFlowSeqFirst, psFlowSeqEntry:
		first := p.state == psFlowSeqFirst
		if first {
			p.marks = append(p.marks, t.start)
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
		}
		if t.typ != tFlowSeqEnd {
			if !first {
				if t.typ != tFlowEntry {
					return p.parseError(p.popMark(), true, "did not find expected ',' or ']'", t.start)
				}
				s.take()
				if t, ok = s.peek(); !ok {
					return event{}, false
				}
			}
			if t.typ == tKey {
				p.state = psFlowSeqEntryMapKey
				s.take()
				return event{typ: eMapStart}, true
			}
			if t.typ != tFlowSeqEnd {
				p.states = append(p.states, psFlowSeqEntry)
				return p.node(false, false)
			}
		}
		p.pop()
		p.popMark()
		s.take()
		return event{typ: eSeqEnd}, true
	case psFlowSeqEntryMapKey:
		if t.typ != tValue && t.typ != tFlowEntry && t.typ != tFlowSeqEnd {
			p.states = append(p.states, psFlowSeqEntryMapValue)
			return p.node(false, false)
		}
		s.take()
		p.state = psFlowSeqEntryMapValue
		return event{typ: eScalar}, true
	case psFlowSeqEntryMapValue:
		if t.typ == tValue {
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
			if t.typ != tFlowEntry && t.typ != tFlowSeqEnd {
				p.states = append(p.states, psFlowSeqEntryMapEnd)
				return p.node(false, false)
			}
		}
		p.state = psFlowSeqEntryMapEnd
		return event{typ: eScalar}, true
	case psFlowSeqEntryMapEnd:
		p.state = psFlowSeqEntry
		return event{typ: eMapEnd}, true
	case psFlowMapFirstKey, psFlowMapKey:
		first := p.state == psFlowMapFirstKey
		if first {
			p.marks = append(p.marks, t.start)
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
		}
		if t.typ != tFlowMapEnd {
			if !first {
				if t.typ != tFlowEntry {
					return p.parseError(p.popMark(), true, "did not find expected ',' or '}'", t.start)
				}
				s.take()
				if t, ok = s.peek(); !ok {
					return event{}, false
				}
			}
			if t.typ == tKey {
				s.take()
				if t, ok = s.peek(); !ok {
					return event{}, false
				}
				if t.typ != tValue && t.typ != tFlowEntry && t.typ != tFlowMapEnd {
					p.states = append(p.states, psFlowMapValue)
					return p.node(false, false)
				}
				p.state = psFlowMapValue
				return event{typ: eScalar}, true
			}
			if t.typ != tFlowMapEnd {
				p.states = append(p.states, psFlowMapEmptyValue)
				return p.node(false, false)
			}
		}
		p.pop()
		p.popMark()
		s.take()
		return event{typ: eMapEnd}, true
	case psFlowMapValue, psFlowMapEmptyValue:
		if p.state == psFlowMapEmptyValue {
			p.state = psFlowMapKey
			return event{typ: eScalar}, true
		}
		if t.typ == tValue {
			s.take()
			if t, ok = s.peek(); !ok {
				return event{}, false
			}
			if t.typ != tFlowEntry && t.typ != tFlowMapEnd {
				p.states = append(p.states, psFlowMapKey)
				return p.node(false, false)
			}
		}
		p.state = psFlowMapKey
		return event{typ: eScalar}, true
	}
	return event{}, true // psEnd
}

func (p *syntaxParser) node(block, indentless bool) (event, bool) {
	s := p.s
	t, ok := s.peek()
	if !ok {
		return event{}, false
	}
	if t.typ == tAlias {
		name := t.value
		p.pop()
		s.take()
		return event{typ: eAlias, anchor: name}, true
	}
	start := t.start
	anchor := ""
	if t.typ == tAnchor {
		anchor = t.value
		s.take()
		if t, ok = s.peek(); !ok {
			return event{}, false
		}
	}
	switch {
	case indentless && t.typ == tBlockEntry:
		p.state = psIndentlessSeqEntry
		return event{typ: eSeqStart, anchor: anchor}, true
	case t.typ == tScalar:
		p.pop()
		s.take()
		return event{typ: eScalar, anchor: anchor}, true
	case t.typ == tFlowSeqStart:
		p.state = psFlowSeqFirst
		return event{typ: eSeqStart, anchor: anchor}, true
	case t.typ == tFlowMapStart:
		p.state = psFlowMapFirstKey
		return event{typ: eMapStart, anchor: anchor}, true
	case block && t.typ == tBlockSeqStart:
		p.state = psBlockSeqFirst
		return event{typ: eSeqStart, anchor: anchor}, true
	case block && t.typ == tBlockMapStart:
		p.state = psBlockMapFirstKey
		return event{typ: eMapStart, anchor: anchor}, true
	case anchor != "":
		p.pop()
		return event{typ: eScalar, anchor: anchor}, true
	}
	problem := "did not find expected node content"
	return p.parseError(start, true, problem, t.start)
}

// checkSyntax tells whether yaml.v3's Unmarshal parses data (see the top
// of this file).
func checkSyntax(data []byte) (syntaxVerdict, error) {
	r, serr, unknown, at := readText(data)
	if unknown != nil {
		return syntaxUnknown, unknown
	}
	if serr == nil {
		_, v, err := parseRunes(r)
		return v, err
	}
	// yaml.v3 decodes its input 512 bytes at a time as its scanner needs
	// them, and stops after the first document: text it never needs is
	// never decoded. Past the scanner's last look, with 4 KiB to spare
	// (512 characters of look-ahead, a chunk, the chunk before), the
	// reader's error is not met.
	prefix, _, _, _ := readText(data[:at])
	s, v, _ := parseRunes(prefix)
	if v == syntaxOK && s.docEnded {
		seen := 0
		for _, c := range prefix[:min(s.maxPeek+1, len(prefix))] {
			seen += utf8.RuneLen(c) + 1 // + 1: a "\r" dropped before "\n"
		}
		if at > seen+4096 {
			return syntaxOK, nil
		}
	}
	return syntaxBad, serr
}

// parseRunes runs the scanner and the parser over r up to the end of the
// first document, as yaml.v3's Unmarshal does.
func parseRunes(r []rune) (*syntaxScanner, syntaxVerdict, error) {
	s := &syntaxScanner{r: r}
	p := &syntaxParser{s: s}
	anchors := map[string]bool{}
	for {
		ev, ok := p.next()
		if !ok {
			if s.err != nil {
				return s, syntaxBad, s.err
			}
			return s, syntaxUnknown, s.unknown
		}
		switch ev.typ {
		case eScalar, eSeqStart, eMapStart:
			if ev.anchor != "" {
				anchors[ev.anchor] = true
			}
		case eAlias:
			if !anchors[ev.anchor] {
				return s, syntaxBad, &SyntaxError{Problem: "unknown anchor '" + ev.anchor + "' referenced"}
			}
		case eStreamEnd:
			return s, syntaxOK, nil
		case eDocEnd, eNone:
			// yaml.v3 reads the first document only, and scans the
			// tokens after it as far as this scanner has: what follows
			// is not read.
			s.docEnded = true
			return s, syntaxOK, nil
		}
	}
}
