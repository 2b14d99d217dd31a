package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/yunikorn-userinfo/userinfo/policy/appid"
)

// RuleChargedUser is an application that YuniKorn charges to a user other
// than the one its Pods' user.info names (or to nobody, because none of
// them recorded one).
const RuleChargedUser = "charged-user-mismatch"

// NobodyUser is the user YuniKorn's shim charges a Pod to when it records
// none (k8shim constants.DefaultUser).
const NobodyUser = "nobody"

// The allocation tags the shim gives every ask and allocation of a Pod
// (k8shim common.CreateTagsForTask: the scheduler interface's
// DomainK8s + GroupMeta + KeyNamespace and KeyPodName).
const (
	tagNamespace = "kubernetes.io/meta/namespace"
	tagPodName   = "kubernetes.io/meta/podName"
)

// maxRESTBody bounds one REST answer: YuniKorn lists every application of
// a partition, with its asks and allocations, in one response.
const maxRESTBody = 256 << 20

// ChargedOptions say where YuniKorn's REST API is and what to compare.
type ChargedOptions struct {
	// URL is the base of YuniKorn's REST API (yunikorn-core's webservice,
	// by default on the scheduler's port 9080:
	// http://yunikorn-service.yunikorn.svc:9080). Required.
	URL string
	// Client makes the requests (default: one with a 30 s timeout).
	Client *http.Client
	// Namespace limits the report to the applications with a Pod in it;
	// "" reports all.
	Namespace string
	// PageSize is the Limit of the Pod list requests (default 500).
	PageSize int64
	// Logger gets debug lines (default: discard).
	Logger *slog.Logger
}

// ChargedApp is one YuniKorn application as its REST API describes it,
// with the Pods its asks and allocations name.
type ChargedApp struct {
	Partition     string
	ApplicationID string
	Queue         string
	// User is the user YuniKorn charges the application to.
	User string
	Pods []PodRef
}

// PodRef names a Pod of an application.
type PodRef struct{ Namespace, Name string }

// The parts of yunikorn-core's webservice answers (pkg/webservice/dao,
// v1.9.0) that the comparison reads: GET /ws/v1/partitions gives
// PartitionInfo, GET /ws/v1/partition/{p}/applications/active gives
// ApplicationDAOInfo, whose requests (AllocationAskDAOInfo) and allocations
// (AllocationDAOInfo) carry the shim's tags.
type (
	restPartition struct {
		Name string `json:"name"`
	}
	restApplication struct {
		ApplicationID string    `json:"applicationID"`
		Partition     string    `json:"partition"`
		QueueName     string    `json:"queueName"`
		User          string    `json:"user"`
		Requests      []restAsk `json:"requests"`
		Allocations   []restAsk `json:"allocations"`
	}
	restAsk struct {
		AllocationTags map[string]string `json:"allocationTags"`
	}
)

// ChargedApps reads every active application of every partition from
// YuniKorn's REST API.
func ChargedApps(ctx context.Context, opts ChargedOptions) ([]ChargedApp, error) {
	base, err := CheckRESTURL(opts.URL)
	if err != nil {
		return nil, err
	}
	hc := opts.Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	var parts []restPartition
	if err := restGet(ctx, hc, base+"/ws/v1/partitions", &parts); err != nil {
		return nil, fmt.Errorf("read YuniKorn's partitions: %w", err)
	}
	var apps []ChargedApp
	for _, p := range parts {
		if p.Name == "" {
			return nil, fmt.Errorf("read YuniKorn's partitions: %s/ws/v1/partitions: a partition without a name", base)
		}
		var list []restApplication
		if err := restGet(ctx, hc, base+"/ws/v1/partition/"+url.PathEscape(p.Name)+"/applications/active", &list); err != nil {
			return nil, fmt.Errorf("read the applications of partition %s: %w", p.Name, err)
		}
		for _, a := range list {
			app := ChargedApp{Partition: p.Name, ApplicationID: a.ApplicationID, Queue: a.QueueName, User: a.User}
			seen := map[PodRef]bool{}
			for _, ask := range slices.Concat(a.Allocations, a.Requests) {
				ref := PodRef{Namespace: ask.AllocationTags[tagNamespace], Name: ask.AllocationTags[tagPodName]}
				if ref.Namespace == "" || ref.Name == "" || seen[ref] {
					continue
				}
				seen[ref] = true
				app.Pods = append(app.Pods, ref)
			}
			apps = append(apps, app)
		}
	}
	return apps, nil
}

// CheckRESTURL checks the URL of YuniKorn's REST API and returns it
// without a trailing slash.
func CheckRESTURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("YuniKorn's REST API: no URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("YuniKorn's REST API URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("YuniKorn's REST API URL %q: want http:// or https:// and a host, as http://yunikorn-service.yunikorn.svc:9080", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("YuniKorn's REST API URL %q: want no query or fragment", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// restGet decodes the JSON answer of one GET.
func restGet(ctx context.Context, hc *http.Client, target string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRESTBody+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", target, err)
	}
	if len(body) > maxRESTBody {
		return fmt.Errorf("GET %s: the answer is larger than %d MiB", target, maxRESTBody>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", target, resp.Status, clip(strings.TrimSpace(string(body)), 512))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: not YuniKorn's JSON: %w", target, err)
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ChargedReport is what the comparison found.
type ChargedReport struct {
	Findings []Finding `json:"findings"`
	// Applications counts the applications compared, Pods their Pods.
	Applications int `json:"applications"`
	Pods         int `json:"pods"`
	// PodsGone counts the Pods YuniKorn still lists that the API server no
	// longer has (deleted since, or never stored): not compared.
	PodsGone int `json:"podsGone,omitempty"`
}

// Charged asks YuniKorn's REST API which user each active application is
// charged to, reads the user.info of its Pods from the API server, and
// reports every application charged to another user than its Pods name,
// or to nobody because a Pod recorded no one: one finding per application,
// on its first such Pod, saying what to do.
func Charged(ctx context.Context, cs kubernetes.Interface, opts ChargedOptions) (*ChargedReport, error) {
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	apps, err := ChargedApps(ctx, opts)
	if err != nil {
		return nil, err
	}
	// The namespaces to read, and the Pods wanted in each.
	wanted := map[string]map[string]bool{}
	keep := apps[:0]
	for _, a := range apps {
		if opts.Namespace != "" && !slices.ContainsFunc(a.Pods, func(p PodRef) bool { return p.Namespace == opts.Namespace }) {
			continue
		}
		keep = append(keep, a)
		for _, p := range a.Pods {
			if wanted[p.Namespace] == nil {
				wanted[p.Namespace] = map[string]bool{}
			}
			wanted[p.Namespace][p.Name] = true
		}
	}
	apps = keep
	users, err := podUsers(ctx, cs, wanted, opts.PageSize)
	if err != nil {
		return nil, err
	}
	rep := &ChargedReport{Findings: []Finding{}, Applications: len(apps)}
	for _, a := range apps {
		if f, ok := chargedFinding(a, users, rep); ok {
			rep.Findings = append(rep.Findings, f)
		}
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Resource.Namespace != b.Resource.Namespace {
			return a.Resource.Namespace < b.Resource.Namespace
		}
		return a.AppID < b.AppID
	})
	logger.Debug("charged users compared", "applications", rep.Applications, "pods", rep.Pods, "findings", len(rep.Findings))
	return rep, nil
}

// podUser is what a Pod's user.info names to YuniKorn.
type podUser struct {
	// user is the user it names; "" when it records none or its value is
	// one the policy refuses (problem says which).
	user    string
	problem string
}

// podUsers reads the user.info of the wanted Pods, namespace by namespace.
func podUsers(ctx context.Context, cs kubernetes.Interface, wanted map[string]map[string]bool, pageSize int64) (map[PodRef]podUser, error) {
	out := map[PodRef]podUser{}
	for _, ns := range slices.Sorted(maps.Keys(wanted)) {
		opts := metav1.ListOptions{Limit: pageSize}
		for {
			l, err := cs.CoreV1().Pods(ns).List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("list the Pods of namespace %s: %w", ns, err)
			}
			for i := range l.Items {
				p := &l.Items[i]
				if wanted[ns][p.Name] {
					out[PodRef{Namespace: ns, Name: p.Name}] = userOf(p)
				}
			}
			if l.Continue == "" {
				break
			}
			opts.Continue = l.Continue
		}
	}
	return out, nil
}

func userOf(p *corev1.Pod) podUser {
	v, ok := p.Annotations[AnnotationKey]
	if !ok || v == "" {
		return podUser{problem: "records no user.info"}
	}
	id, err := ParseUserInfo(v)
	if err != nil {
		return podUser{problem: "has an invalid user.info (" + err.Error() + ")"}
	}
	return podUser{user: id.User}
}

// chargedFinding compares one application's user with its Pods'.
func chargedFinding(a ChargedApp, users map[PodRef]podUser, rep *ChargedReport) (Finding, bool) {
	var (
		bad    []PodRef
		others = map[string]int{}
	)
	for _, ref := range a.Pods {
		u, ok := users[ref]
		if !ok {
			rep.PodsGone++
			continue
		}
		rep.Pods++
		switch {
		case u.user == "":
			// Records no one (YuniKorn reads that as nobody): even in an
			// application charged to nobody, no submitter is known.
			others["(none)"]++
		case u.user == a.User:
			continue
		default:
			others[u.user]++
		}
		bad = append(bad, ref)
	}
	if len(bad) == 0 {
		return Finding{}, false
	}
	sort.Slice(bad, func(i, j int) bool {
		if bad[i].Namespace != bad[j].Namespace {
			return bad[i].Namespace < bad[j].Namespace
		}
		return bad[i].Name < bad[j].Name
	})
	first := bad[0]
	names := make([]string, 0, min(len(bad), 5))
	for _, r := range bad[:min(len(bad), 5)] {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	more := ""
	if len(bad) > len(names) {
		more = fmt.Sprintf(" and %d more", len(bad)-len(names))
	}
	msg := fmt.Sprintf("YuniKorn charges application %s (partition %s, queue %s) to %q, but %d of its %d Pods record %s (%s%s). ",
		a.ApplicationID, a.Partition, a.Queue, a.User, len(bad), len(a.Pods), recordWhat(others), strings.Join(names, ", "), more)
	msg += chargedAdvice(a)
	return Finding{
		Rule:        RuleChargedUser,
		Resource:    Resource{APIVersion: "v1", Kind: "Pod", Namespace: first.Namespace, Name: first.Name},
		User:        users[first].user,
		AppID:       a.ApplicationID,
		ChargedUser: a.User,
		Message:     msg,
	}, true
}

// recordWhat says what the mismatching Pods record, by user.
func recordWhat(others map[string]int) string {
	parts := make([]string, 0, len(others))
	for _, u := range slices.Sorted(maps.Keys(others)) {
		if u == "(none)" {
			parts = append(parts, fmt.Sprintf("no user (%d)", others[u]))
			continue
		}
		parts = append(parts, fmt.Sprintf("%q (%d)", u, others[u]))
	}
	return strings.Join(parts, ", ")
}

// chargedAdvice says why the application has its user and what to do.
func chargedAdvice(a ChargedApp) string {
	// YuniKorn gives an application the user of the Pod that created it
	// and never changes it; Pods that join it later run as that user.
	if ns := appid.GeneratedNamespace(a.ApplicationID); ns != "" {
		return fmt.Sprintf("It is namespace %s's generated application, which every Pod without an application ID joins "+
			"while generateUniqueAppId is false (YuniKorn's default); YuniKorn gave it the user of the Pod that created it "+
			"and keeps it until its last Pod ends. To do: set generateUniqueAppIds: true in the policy's scheduling setting "+
			"and admissionController.filtering.generateUniqueAppId \"true\" in yunikorn-configs (or give workloads an "+
			"applicationId label), so that new Pods get applications of their own, charged to the user their user.info "+
			"names; then recreate the Pods listed (roll out their Deployments, rerun their Jobs) so they leave it",
			ns)
	}
	if a.User == NobodyUser {
		return "Its first Pod recorded no submitter (created before anything recorded user.info, or while YuniKorn's " +
			"admission controller ran with bypassAuth and nothing else recorded it). To do: recreate its Pods now that " +
			"the webhook records the submitter, or give them an application ID of their own"
	}
	return "YuniKorn gave the application the user of the Pod that created it; the Pods listed joined it by carrying " +
		"its application ID. To do: give them an application ID of their own (the applicationOwnership setting, in " +
		"enforce mode, refuses a Pod that joins another user's application) and recreate them"
}
