package nsfilter

import (
	"regexp"
	"testing"
)

func TestProcessed(t *testing.T) {
	re := func(p ...string) []*regexp.Regexp {
		var out []*regexp.Regexp
		for _, s := range p {
			out = append(out, regexp.MustCompile(s))
		}
		return out
	}
	for _, c := range []struct {
		process, bypass []*regexp.Regexp
		enable          State
		ns              string
		want            bool
	}{
		{nil, re(DefaultBypass), Unset, "team", true},
		{nil, re(DefaultBypass), Unset, "kube-system", false},
		{nil, re(DefaultBypass), True, "kube-system", true},
		{re("^team"), nil, Unset, "teams", true},
		{re("^team$"), nil, Unset, "other", false},
		{re("^team$"), nil, False, "team", false},
		{re("am"), re("^te"), Unset, "team", false},
		{re("am"), nil, Unset, "team", true}, // unanchored search
	} {
		if got := Processed(c.process, c.bypass, c.enable, c.ns); got != c.want {
			t.Errorf("Processed(%v, %v, %v, %q) = %t, want %t", c.process, c.bypass, c.enable, c.ns, got, c.want)
		}
	}
	for _, c := range []struct {
		present bool
		value   string
		want    State
	}{{false, "", Unset}, {true, "true", True}, {true, "True", False}, {true, "", False}} {
		if got := Flag(c.present, c.value); got != c.want {
			t.Errorf("Flag(%t, %q) = %v, want %v", c.present, c.value, got, c.want)
		}
	}
}

func TestSplitPatterns(t *testing.T) {
	got, problem := SplitPatterns(`^a{1,2}$,[,x],\,y,(p,q)`)
	want := []string{`^a{1,2}$`, `[,x]`, `\,y`, `(p,q)`}
	if problem != "" || len(got) != len(want) {
		t.Fatalf("SplitPatterns = %q, %q", got, problem)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("piece %d = %q, want %q", i, got[i], want[i])
		}
	}
	if _, problem := SplitPatterns("[a,b"); problem == "" {
		t.Error("an unclosed class must be an error")
	}
}
