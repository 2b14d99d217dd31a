package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ruleString is a string that spells one of YuniKorn's rules, and the
// package (directory from the repository root) that owns it.
type ruleString struct {
	s, owner string
	// common: the string has other meanings too (a report's property
	// named after the label), so only declaring it as a constant or
	// variable counts as defining the rule.
	common bool
}

var ruleStrings = []ruleString{
	{s: "yunikorn.apache.org/user.info", owner: "policy/userinfo"},
	{s: "yunikorn.apache.org/app-id", owner: "policy/appid"},
	{s: "spark-app-selector", owner: "policy/appid"},
	{s: "-uniqueautogen", owner: "policy/appid"},
	{s: "-autogen", owner: "policy/appid"},
	{s: "yunikorn-", owner: "policy/appid"},
	{s: "applicationId", owner: "policy/appid", common: true},
}

// ruleExceptions are the files allowed to spell a rule string outside its
// package, each with the reason.
var ruleExceptions = map[string]string{
	// The e2e module cannot import the root module: its requirements
	// would raise the versions of modules (prometheus, x/crypto,
	// protobuf) that the kube-apiserver built from that module links.
	"e2e/cmd/scalebench/main.go": "yunikorn.apache.org/user.info applicationId",
	"e2e/cmd/admbench/main.go":   "yunikorn.apache.org/user.info",
}

// TestRulesDefinedOnce: each YuniKorn rule string is spelled in one
// package, the one that owns the rule, and imported everywhere else. The
// test reads every Go file of every module of the repository (tests and
// testdata directories aside) and parses it. A file outside the owning
// package defines the rule when a string literal in it equals the rule
// string, or holds it as a JSON string (`"…"` in JSON text being built);
// for a string with other meanings too, only when it declares a constant
// or variable whose value is exactly the rule string.
//
// Tests may spell the strings, and name them as constants: requests and
// answers written out independently are what catch a wrong constant, and
// the modules that test the product from outside (e2e, test/manifests)
// do not import it. Comments and prose (help text that names the
// annotation) are not definitions. A copied function
// is caught when it spells one of these strings, as any copy of the ID
// sources or the generated IDs must; the user.info value's own keys
// ("user", "groups") are too common to tell a copy of its parser apart
// (YuniKorn's REST answers and Kubewarden's protocol use them too).
func TestRulesDefinedOnce(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	var found []string
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "build") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		files++
		found = append(found, ruleDefinitions(t, path, rel)...)
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, files, 150, "the walk found the repository's Go files")
	sort.Strings(found)
	assert.Empty(t, found, "rule strings defined outside their package: import policy/userinfo or policy/appid instead")
}

// The scan finds each way of defining a rule string, and only those.
func TestRulesDefinedOnce_finds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.go")
	require.NoError(t, os.WriteFile(path, []byte(`package x

// The yunikorn.apache.org/user.info annotation, in prose: not a definition.
const key = "yunikorn.apache.org/user.info"

var label, help = "applicationId", "records yunikorn.apache.org/user.info"

func f(ns string) (string, string, map[string]string) {
	return "yunikorn-" + ns + "-autogen", `+"`"+`{"yunikorn.apache.org/app-id":"a"}`+"`"+`, map[string]string{"applicationId": "a"}
}
`), 0o600))
	got := ruleDefinitions(t, path, "internal/x/x.go")
	require.Len(t, got, 5, "%q", got)
	for i, want := range []string{
		`4:13: declares "yunikorn.apache.org/user.info"`,
		`6:19: declares "applicationId"`,
		`9:9: spells "yunikorn-"`,
		`9:28: spells "-autogen"`,
		`9:40: spells "yunikorn.apache.org/app-id"`,
	} {
		assert.Contains(t, got[i], want)
	}
	got = ruleDefinitions(t, path, "policy/appid/x.go")
	require.Len(t, got, 1, "the owner may spell its own strings")
	assert.Contains(t, got[0], `declares "yunikorn.apache.org/user.info"`)
}

// ruleDefinitions lists the definitions of rule strings in the file at
// path (rel from the repository root) outside their owners.
func ruleDefinitions(t *testing.T, path, rel string) []string {
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	require.NoError(t, err, rel)
	dir := filepath.ToSlash(filepath.Dir(rel))
	var out []string
	declared := map[token.Pos]bool{}
	report := func(pos token.Pos, r ruleString, how string) {
		if dir == r.owner || strings.Contains(" "+ruleExceptions[rel]+" ", " "+r.s+" ") || declared[pos] {
			return
		}
		declared[pos] = true
		out = append(out, fset.Position(pos).String()+": "+how+" "+strconv.Quote(r.s)+" (owned by "+r.owner+")")
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			for _, v := range n.Values {
				if s, ok := stringLit(v); ok {
					for _, r := range ruleStrings {
						if s == r.s {
							report(v.Pos(), r, "declares")
						}
					}
				}
			}
		case *ast.BasicLit:
			s, ok := stringLit(n)
			if !ok {
				return true
			}
			for _, r := range ruleStrings {
				if !r.common && (s == r.s || strings.Contains(s, `"`+r.s+`"`)) {
					report(n.Pos(), r, "spells")
				}
			}
		}
		return true
	})
	return out
}

// stringLit is the value of e if it is a string literal.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
