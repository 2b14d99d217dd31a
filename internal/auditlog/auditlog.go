// Package auditlog finds, in a Kubernetes API server's audit log, the
// requests a webhook in monitor mode admitted although it would have
// refused them, and (Replay) the stored requests the policy, asked
// afresh, refuses. host/admission.Monitor marks such an answer with the audit
// annotation "monitor: would be refused"; the API server records it, with
// the webhook's name as prefix, in the annotations of the request's audit
// event (audit.k8s.io/v1 Event, level Metadata or above), beside the
// policy's own "rule" and "claimed" annotations.
package auditlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
)

// MaxLine bounds one line of the log: an event at level RequestResponse
// carries the object twice, and the API server takes objects of up to
// about 3 MiB.
const MaxLine = 64 << 20

// The policy's audit annotation keys (policy/validate.go), under the
// webhook's name.
const (
	keyRule    = "rule"
	keyClaimed = "claimed"
)

// event is what is read of an audit.k8s.io/v1 Event (the field names of
// k8s.io/apiserver/pkg/apis/audit/v1).
type event struct {
	Kind             string    `json:"kind"`
	APIVersion       string    `json:"apiVersion"`
	AuditID          string    `json:"auditID"`
	Stage            string    `json:"stage"`
	RequestURI       string    `json:"requestURI"`
	Verb             string    `json:"verb"`
	User             userInfo  `json:"user"`
	ImpersonatedUser *userInfo `json:"impersonatedUser"`
	SourceIPs        []string  `json:"sourceIPs"`
	UserAgent        string    `json:"userAgent"`
	ObjectRef        *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject  json.RawMessage   `json:"requestObject"`
	ResponseObject json.RawMessage   `json:"responseObject"`
	Timestamp      time.Time         `json:"requestReceivedTimestamp"`
	Annotations    map[string]string `json:"annotations"`
}

type userInfo struct {
	Username string              `json:"username"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// objectMeta is the name an object carries (events at level Request or
// RequestResponse).
type objectMeta struct {
	Metadata struct {
		Name         string `json:"name"`
		GenerateName string `json:"generateName"`
	} `json:"metadata"`
}

// Admission is one request admitted in monitor mode that the webhook
// would have refused, or (Source replay) one stored that the policy
// refuses when asked afresh.
type Admission struct {
	// Source says how it was found: SourceMonitor or SourceReplay.
	Source    string    `json:"source"`
	AuditID   string    `json:"auditID"`
	Time      time.Time `json:"time"`
	Verb      string    `json:"verb"`
	Resource  string    `json:"resource"` // resource[/subresource], with its group: pods, deployments.apps
	Namespace string    `json:"namespace,omitempty"`
	// Name is empty when the event does not say it: a CREATE with
	// generateName at level Metadata (GenerateName then says the prefix
	// when the event has the request object).
	Name         string   `json:"name,omitempty"`
	GenerateName string   `json:"generateName,omitempty"`
	User         string   `json:"user"`
	Groups       []string `json:"groups,omitempty"`
	// ImpersonatedUser is who the request acted as, when User
	// impersonated someone.
	ImpersonatedUser string `json:"impersonatedUser,omitempty"`
	UserAgent        string `json:"userAgent,omitempty"`
	// Webhook is the name of the webhook that would have refused it;
	// empty for a replay.
	Webhook string `json:"webhook,omitempty"`
	// Rule is the policy's rule that decided (its "rule" annotation),
	// Claimed the user.info value the request supplied, if any.
	Rule    string `json:"rule,omitempty"`
	Claimed string `json:"claimed,omitempty"`
	// Message is the policy's refusal (replay only: an audit event does
	// not carry a webhook's message).
	Message string `json:"message,omitempty"`
	// Code is the API server's answer: a request admitted by the webhook
	// can still fail later (quota, a conflict); 0 when not recorded.
	Code int `json:"code"`
	// DryRun requests persisted nothing.
	DryRun bool `json:"dryRun,omitempty"`
}

// Persisted reports whether the request changed the cluster: not a dry
// run, and answered with success.
func (a Admission) Persisted() bool { return !a.DryRun && a.Code >= 200 && a.Code < 300 }

// Options select what Read keeps.
type Options struct {
	// Namespace keeps one namespace's requests; empty: all.
	Namespace string
	// Webhook keeps one webhook's annotations; empty: any webhook whose
	// "monitor" audit annotation says "would be refused".
	Webhook string
	// Replay, if set, also asks the policy about every stored request
	// no monitor mark covers.
	Replay *Replay
}

// Result is what Read found.
type Result struct {
	Admissions []Admission `json:"admissions"`
	// Lines and Events count the log's non-empty lines and the events
	// decoded (only lines that mention the monitor annotation are, and
	// with Replay those with a request object).
	Lines  int `json:"lines"`
	Events int `json:"events"`
	// Replayed counts the stored requests that supplied user.info and
	// the policy was asked about; UpdatesUnjudged the updates that may
	// have changed it but could not be judged (Replay).
	Replayed        int `json:"replayed,omitempty"`
	UpdatesUnjudged int `json:"updatesUnjudged,omitempty"`
}

// Read reads an audit log in the API server's JSON format, one event per
// line (--audit-log-format=json), and returns the admissions it finds,
// one per request (fold), oldest first. A line that is not JSON, or
// not an audit.k8s.io/v1 Event, is an error naming the line; lines that
// do not mention the monitor annotation are only checked to be JSON
// objects if they are the first.
func Read(ctx context.Context, r io.Reader, opts Options) (*Result, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	res := &Result{}
	pending := map[string]int{}
	marker := []byte(admission.AuditMonitorWouldRefuse)
	var rp *replayer
	if opts.Replay != nil {
		rp = &replayer{Replay: opts.Replay, ctx: ctx, states: map[string]json.RawMessage{}}
	}
	for n := 1; ; n++ {
		line, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read the audit log: line %d: %w", n, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			res.Lines++
			if res.Lines == 1 || bytes.Contains(line, marker) || rp != nil && bytes.Contains(line, []byte(`"requestObject"`)) {
				if perr := res.add(line, opts, pending, rp); perr != nil {
					return nil, fmt.Errorf("read the audit log: line %d: %w", n, perr)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("read the audit log: line %d: %w", n, cerr)
		}
	}
	sort.SliceStable(res.Admissions, func(i, j int) bool { return res.Admissions[i].Time.Before(res.Admissions[j].Time) })
	return res, nil
}

// readLine returns the next line without its newline, at most MaxLine
// bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLine {
			return nil, fmt.Errorf("longer than %d bytes: not an audit event", MaxLine)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// add decodes one event and keeps it if it is a would-be refusal, or one
// the replay rp (if any) finds.
func (res *Result) add(line []byte, opts Options, pending map[string]int, rp *replayer) error {
	var e event
	if err := json.Unmarshal(line, &e); err != nil {
		return fmt.Errorf("not an audit event (audit.k8s.io/v1 Event JSON, --audit-log-format=json): %w", err)
	}
	if e.Kind != "Event" || e.APIVersion != "audit.k8s.io/v1" {
		return fmt.Errorf("kind %q, apiVersion %q: want an audit.k8s.io/v1 Event (--audit-log-format=json)", e.Kind, e.APIVersion)
	}
	res.Events++
	webhook := ""
	for k, v := range e.Annotations {
		name, key, ok := strings.Cut(k, "/")
		if !ok || key != admission.AuditMonitor || v != admission.AuditMonitorWouldRefuse {
			continue
		}
		if opts.Webhook != "" && name != opts.Webhook {
			continue
		}
		if webhook == "" || name < webhook {
			webhook = name
		}
	}
	if webhook == "" {
		if rp == nil || (e.Stage != "ResponseComplete" && e.Stage != "Panic") ||
			opts.Namespace != "" && (e.ObjectRef == nil || e.ObjectRef.Namespace != opts.Namespace) {
			return nil
		}
		return rp.judge(res, &e)
	}
	a := admissionOf(&e, webhook)
	if opts.Namespace != "" && a.Namespace != opts.Namespace {
		return nil
	}
	res.fold(a, e.Stage, pending)
	return nil
}

// admissionOf is the row of e, with the annotations of webhook.
func admissionOf(e *event, webhook string) Admission {
	a := Admission{
		Source: SourceMonitor, AuditID: e.AuditID, Time: e.Timestamp, Verb: e.Verb,
		User: e.User.Username, Groups: e.User.Groups, UserAgent: e.UserAgent, Webhook: webhook,
		Rule: e.Annotations[webhook+"/"+keyRule], Claimed: e.Annotations[webhook+"/"+keyClaimed],
		DryRun: dryRun(e.RequestURI),
	}
	if e.ImpersonatedUser != nil {
		a.ImpersonatedUser = e.ImpersonatedUser.Username
	}
	if e.ResponseStatus != nil {
		a.Code = e.ResponseStatus.Code
	}
	if ref := e.ObjectRef; ref != nil {
		a.Resource = ref.Resource
		if ref.APIGroup != "" {
			a.Resource += "." + ref.APIGroup
		}
		if ref.Subresource != "" {
			a.Resource += "/" + ref.Subresource
		}
		a.Namespace, a.Name = ref.Namespace, ref.Name
	}
	for _, raw := range []json.RawMessage{e.ResponseObject, e.RequestObject} {
		var o objectMeta
		if len(raw) == 0 || json.Unmarshal(raw, &o) != nil {
			continue
		}
		if a.Name == "" {
			a.Name = o.Metadata.Name
		}
		if a.GenerateName == "" {
			a.GenerateName = o.Metadata.GenerateName
		}
	}
	return a
}

// fold adds a, an event of stage, to the admissions. One request is
// written once per stage, and its final stage (ResponseComplete, or Panic)
// has the answer: an earlier stage's row waits in pending for it. The
// stages of one request share their audit ID and the time the API server
// received it; the audit ID alone is no key, since a client may choose it
// (the Audit-ID header), so that a later dry run would hide a persisted
// request of the same ID. A final stage's row is never replaced.
func (res *Result) fold(a Admission, stage string, pending map[string]int) {
	key := a.AuditID + "\x00" + a.Time.UTC().Format(time.RFC3339Nano)
	final := stage == "ResponseComplete" || stage == "Panic"
	if i, ok := pending[key]; ok {
		res.Admissions[i] = a
		if final {
			delete(pending, key)
		}
		return
	}
	if !final {
		pending[key] = len(res.Admissions)
	}
	res.Admissions = append(res.Admissions, a)
}

// dryRun reports whether the request URI asks for a dry run.
func dryRun(requestURI string) bool {
	u, err := url.ParseRequestURI(requestURI)
	return err == nil && len(u.Query()["dryRun"]) > 0
}

// WriteTable prints the admissions as a table, one line each.
func (res *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tVERB\tRESOURCE\tNAMESPACE\tNAME\tUSER\tCODE\tRULE")
	for _, a := range res.Admissions {
		verb := a.Verb
		if a.DryRun {
			verb += " (dry run)"
		}
		if a.Source == SourceReplay {
			verb += " (replay)"
		}
		name := a.Name
		if name == "" && a.GenerateName != "" {
			name = a.GenerateName + "*"
		}
		user := a.User
		if a.ImpersonatedUser != "" {
			user += " as " + a.ImpersonatedUser
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", a.Time.UTC().Format(time.RFC3339), Printable(verb), dash(a.Resource),
			dash(a.Namespace), dash(name), dash(user), a.Code, dash(a.Rule))
	}
	return tw.Flush()
}

// dash is s as a table cell: "-" when empty, else Printable.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return Printable(s)
}

// Printable is s with every character a terminal or the table could act
// on escaped as Go escapes it (\x1b, \t, \u202e): control characters,
// format characters (bidirectional overrides), invalid UTF-8, and the
// backslash itself, so an escape is never mistaken for a name. Names in an
// audit log come from clients: a failed create's name can carry terminal
// escapes that would erase the rows above it.
func Printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
