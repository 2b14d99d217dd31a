// Package boundedre compiles the regular expressions the policy module
// reads from its settings and from the cluster without letting one trap
// the module. Go's regexp compiler recurses once per nesting level, and a
// counted repetition x{1,n} becomes n nested levels: deep enough, that
// recursion overflows a TinyGo module's 64 KiB stack, and a trap refuses
// every request that reads the pattern. Every pattern the module compiles
// from input goes through Compile.
package boundedre

import (
	"regexp"
	"strconv"
)

// MaxNesting bounds how deeply a pattern Compile accepts may nest
// (Nesting).
const MaxNesting = 24

// TooDeepError is a pattern that nests past MaxNesting.
type TooDeepError struct{ Pattern string }

func (e *TooDeepError) Error() string {
	return "nests more than " + strconv.Itoa(MaxNesting) + " levels once its repetitions are expanded"
}

// Compile is regexp.Compile for a pattern within MaxNesting, and a
// *TooDeepError for one past it, which never reaches the compiler.
func Compile(expr string) (*regexp.Regexp, error) {
	if Nesting(expr) > MaxNesting {
		return nil, &TooDeepError{Pattern: expr}
	}
	return regexp.Compile(expr)
}

// Nesting estimates the depth of a pattern's compiled form: its deepest
// group nesting plus, for every counted repetition {n,m}, m-n levels.
func Nesting(expr string) int {
	depth, deepest, ranges := 0, 0, 0
	inClass := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			if i+1 < len(expr) && expr[i+1] == ']' {
				i++
			}
		case c == '(':
			depth++
			deepest = max(deepest, depth)
		case c == ')':
			depth--
		case c == '{':
			n, m, end, ok := repetition(expr, i)
			if ok {
				if m > n {
					ranges += m - n
				}
				i = end
			}
		}
	}
	return deepest + ranges
}

// repetition reads {n}, {n,} or {n,m} at expr[i]; m is -1 for {n,}.
func repetition(expr string, i int) (n, m, end int, ok bool) {
	j := i + 1
	num := func() (int, bool) {
		start, v := j, 0
		for j < len(expr) && expr[j] >= '0' && expr[j] <= '9' {
			if v < 100000 {
				v = v*10 + int(expr[j]-'0')
			}
			j++
		}
		return v, j > start
	}
	n, ok = num()
	if !ok || j >= len(expr) {
		return 0, 0, 0, false
	}
	m = n
	if expr[j] == ',' {
		j++
		m = -1
		if v, has := num(); has {
			m = v
		}
	}
	if j >= len(expr) || expr[j] != '}' {
		return 0, 0, 0, false
	}
	return n, m, j, true
}
