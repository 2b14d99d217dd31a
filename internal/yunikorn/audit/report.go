package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/yunikorn-userinfo/userinfo/policy/workloads"
)

// The reports are written in one of two APIs of the same shape (see
// ReportAPI); the names and bounds below hold for both.
const (
	ReportPolicy = "yunikorn-user-info"
	ReportSource = "yunikorn-userinfo"
	ReportName   = "yunikorn-userinfo-audit"
	// maxResults bounds the results of one PolicyReport: an object in
	// etcd is limited to about 1.5 MiB, and a result is a few hundred
	// bytes. The summary still counts every finding.
	maxResults = 2000
)

// ReportAPI is an API the findings are reported in: a namespaced kind and
// a cluster-scoped one with the same results, summary and properties.
type ReportAPI struct {
	Name        string // as -o names it
	APIVersion  string
	Kind        string
	ClusterKind string
	GVR         schema.GroupVersionResource
	ClusterGVR  schema.GroupVersionResource
	// TopSource: the report itself names its source (OpenReports), not
	// only each result.
	TopSource bool
	// Install says where the API's CRDs come from, for the error of a
	// cluster that does not serve them.
	Install string
}

var (
	// OpenReports is openreports.io/v1alpha1 (github.com/openreports/
	// reports-api): what Kubewarden 1.30+ and Kyverno 1.15+ write and
	// Policy Reporter reads.
	OpenReports = ReportAPI{
		Name: "openreports", APIVersion: "openreports.io/v1alpha1", Kind: "Report", ClusterKind: "ClusterReport",
		GVR:        schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "reports"},
		ClusterGVR: schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "clusterreports"},
		TopSource:  true,
		Install: "install the OpenReports CRDs (config/crd of github.com/openreports/reports-api v0.2.1; " +
			"Kubewarden 1.30+ and Kyverno 1.15+ install them), or use -o policyreport",
	}
	// WGPolicy is the Kubernetes Policy working group's
	// wgpolicyk8s.io/v1alpha2 (sigs.k8s.io/wg-policy-prototypes
	// policy-report/crd/v1alpha2), which Kubewarden deprecated in 1.33;
	// kept for clusters that have only it.
	WGPolicy = ReportAPI{
		Name: "policyreport", APIVersion: "wgpolicyk8s.io/v1alpha2", Kind: "PolicyReport", ClusterKind: "ClusterPolicyReport",
		GVR:        schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"},
		ClusterGVR: schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"},
		Install: "install the wgpolicyk8s.io CRDs (policy-report/crd/v1alpha2 of sigs.k8s.io/wg-policy-prototypes), " +
			"or use -o openreports",
	}
)

// Served fails, naming the CRD and how to install it, when the cluster
// does not serve both kinds of api.
func Served(disc discovery.DiscoveryInterface, api ReportAPI) error {
	list, err := disc.ServerResourcesForGroupVersion(api.GVR.GroupVersion().String())
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("ask the API server for %s: %w", api.APIVersion, err)
	}
	for _, gvr := range []schema.GroupVersionResource{api.GVR, api.ClusterGVR} {
		found := false
		if list != nil {
			for _, r := range list.APIResources {
				found = found || r.Name == gvr.Resource
			}
		}
		if !found {
			return fmt.Errorf("the cluster does not serve %s.%s (%s): %s", gvr.Resource, gvr.Group, api.APIVersion, api.Install)
		}
	}
	return nil
}

// RuleKindNotServed is the skip result of the ClusterPolicyReport for a
// custom kind of the workloads setting that the API server does not serve.
const RuleKindNotServed = "workload-kind-not-served"

// WriteTable prints the findings as a table, then a summary line.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tKIND\tNAME\tRULE\tUSER\tAPPLICATION\tMESSAGE")
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Resource.Namespace, f.Resource.Kind, f.Resource.Name, f.Rule,
			dash(f.User), dash(f.AppID), strings.ReplaceAll(f.Message, "\n", " "))
	}
	for _, f := range r.ClusterFindings {
		users := make([]string, 0, len(f.Users))
		for _, u := range f.Users {
			users = append(users, u.User)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", "(cluster)", "Application", f.AppID, f.Rule,
			strings.Join(users, ","), f.AppID, strings.ReplaceAll(f.Message, "\n", " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	cluster := ""
	if len(r.ClusterFindings) > 0 {
		cluster = fmt.Sprintf(" and %d cluster-wide", len(r.ClusterFindings))
	}
	if _, err := fmt.Fprintf(w, "%d findings%s; audited %s\n", len(r.Findings), cluster, r.counts()); err != nil {
		return err
	}
	for _, k := range r.Skipped {
		if _, err := fmt.Fprintf(w, "not audited: %s (%s): %s\n", workloads.KindRef{Group: k.Group, Kind: k.Kind}, k.Entry, k.Reason); err != nil {
			return err
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (r *Report) counts() string {
	kinds := make([]string, 0, len(r.Scanned))
	for k := range r.Scanned {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d of %d", k, r.Audited[k], r.Scanned[k]))
	}
	return strings.Join(parts, ", ")
}

// PolicyReports builds one PolicyReport per namespace that has an audited
// object: a fail result per finding (at most maxResults, the summary counts
// them all), and the audited objects without a finding counted as pass
// (not listed: a namespace with many thousand Pods would not fit).
func (r *Report) PolicyReports(api ReportAPI, now time.Time) []*unstructured.Unstructured {
	byNS := map[string][]Finding{}
	for _, f := range r.Findings {
		byNS[f.Resource.Namespace] = append(byNS[f.Resource.Namespace], f)
	}
	names := map[string]bool{}
	for ns := range byNS {
		names[ns] = true
	}
	for ns := range r.Passed {
		names[ns] = true
	}
	sorted := make([]string, 0, len(names))
	for ns := range names {
		sorted = append(sorted, ns)
	}
	sort.Strings(sorted)
	ts := map[string]any{"seconds": now.Unix(), "nanos": int64(0)}
	out := make([]*unstructured.Unstructured, 0, len(sorted))
	for _, ns := range sorted {
		fs := byNS[ns]
		results := make([]any, 0, min(len(fs), maxResults))
		for i, f := range fs {
			if i == maxResults {
				break
			}
			res := map[string]any{"apiVersion": f.Resource.APIVersion, "kind": f.Resource.Kind, "name": f.Resource.Name,
				"namespace": f.Resource.Namespace, "uid": string(f.Resource.UID)}
			props := map[string]any{}
			if f.User != "" {
				props["user"] = f.User
			}
			if f.AppID != "" {
				props["applicationId"] = f.AppID
			}
			result := map[string]any{
				"policy": ReportPolicy, "rule": f.Rule, "result": "fail", "severity": "high", "scored": true,
				"category": "Identity", "message": f.Message, "source": ReportSource, "timestamp": ts,
				"resources": []any{res},
			}
			if len(props) > 0 {
				result["properties"] = props
			}
			results = append(results, result)
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": api.APIVersion,
			"kind":       api.Kind,
			"metadata": map[string]any{
				"name": ReportName, "namespace": ns,
				"labels": map[string]any{"app.kubernetes.io/managed-by": ReportSource},
			},
			"summary": map[string]any{"pass": int64(r.Passed[ns]), "fail": int64(len(fs)), "warn": int64(0), "error": int64(0), "skip": int64(0)},
			"results": results,
		}}
		if api.TopSource {
			u.Object["source"] = ReportSource
		}
		out = append(out, u)
	}
	return out
}

// ClusterPolicyReport builds the cluster-wide report: a fail result per
// application whose Pods in several namespaces name several users (its
// resources the oldest Pod of each user, every namespace and user in its
// message and properties), a skip result per custom kind not audited, and
// the applications across namespaces with one user counted as pass. The
// Pods of such an application are also findings of their namespaces'
// PolicyReports; this result is the one view of the whole application.
// It returns nil when the audit did not read every namespace (an
// application is then not seen whole), or when there is nothing
// cluster-wide to report: no application spans namespaces and every kind
// was audited.
func (r *Report) ClusterPolicyReport(api ReportAPI, now time.Time) *unstructured.Unstructured {
	if !r.AllNamespaces || (r.CrossNamespaceApps == 0 && len(r.Skipped) == 0) {
		return nil
	}
	ts := map[string]any{"seconds": now.Unix(), "nanos": int64(0)}
	results := make([]any, 0, min(len(r.ClusterFindings)+len(r.Skipped), maxResults))
	for _, f := range r.ClusterFindings {
		if len(results) == maxResults {
			break
		}
		resources := make([]any, 0, len(f.Users))
		users := make([]string, 0, len(f.Users))
		for _, u := range f.Users {
			users = append(users, u.User)
			resources = append(resources, map[string]any{"apiVersion": u.Oldest.APIVersion, "kind": u.Oldest.Kind, "name": u.Oldest.Name,
				"namespace": u.Oldest.Namespace, "uid": string(u.Oldest.UID)})
		}
		props := map[string]any{"applicationId": f.AppID, "users": strings.Join(users, ","), "namespaces": strings.Join(f.Namespaces, ","),
			"owner": users[0]}
		if f.MoreUsers > 0 {
			props["moreUsers"] = fmt.Sprint(f.MoreUsers)
		}
		results = append(results, map[string]any{
			"policy": ReportPolicy, "rule": f.Rule, "result": "fail", "severity": "high", "scored": true,
			"category": "Identity", "message": f.Message, "source": ReportSource, "timestamp": ts,
			"resources": resources, "properties": props,
		})
	}
	for _, k := range r.Skipped {
		if len(results) == maxResults {
			break
		}
		kr := workloads.KindRef{Group: k.Group, Kind: k.Kind}
		props := map[string]any{"group": k.Group, "kind": k.Kind, "entry": k.Entry}
		if k.Version != "" {
			props["version"] = k.Version
		}
		results = append(results, map[string]any{
			"policy": ReportPolicy, "rule": RuleKindNotServed, "result": "skip", "scored": false,
			"category": "Identity", "message": kr.String() + " (" + k.Entry + ") was not audited: " + k.Reason,
			"source": ReportSource, "timestamp": ts, "properties": props,
		})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.APIVersion,
		"kind":       api.ClusterKind,
		"metadata": map[string]any{
			"name":   ReportName,
			"labels": map[string]any{"app.kubernetes.io/managed-by": ReportSource},
		},
		"summary": map[string]any{"pass": int64(r.CrossNamespaceApps - len(r.ClusterFindings)), "fail": int64(len(r.ClusterFindings)),
			"warn": int64(0), "error": int64(0), "skip": int64(len(r.Skipped))},
		"results": results,
	}}
	if api.TopSource {
		u.Object["source"] = ReportSource
	}
	return u
}

// ApplyCluster creates or replaces the ClusterPolicyReport, or, when there
// is none (nil: nothing cluster-wide), deletes the one an earlier audit
// wrote (by name and label). Call it only for an audit of every
// namespace: one of a single namespace knows nothing cluster-wide.
func ApplyCluster(ctx context.Context, dyn dynamic.Interface, api ReportAPI, report *unstructured.Unstructured) error {
	c := dyn.Resource(api.ClusterGVR)
	if report != nil {
		return writeOne(ctx, c, api.ClusterKind+" "+report.GetName(), report)
	}
	old, err := c.Get(ctx, ReportName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the %s of an earlier audit: %w", api.ClusterKind, err)
	}
	if old.GetLabels()["app.kubernetes.io/managed-by"] != ReportSource {
		return nil
	}
	err = c.Delete(ctx, ReportName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptrUID(old.GetUID())}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the stale %s %s: %w", api.ClusterKind, ReportName, err)
	}
	return nil
}

// Apply creates every report, or replaces the one of the same name, then
// deletes the reports an earlier audit wrote (by name and label) in
// namespaces (of scope: one namespace, or "" for all) that have none now:
// their objects are gone, and a report that stayed would say otherwise.
// A namespace deleted or being deleted while the audit ran cannot take a
// report: it is skipped and named in the first result, not an error (its
// objects are going away with it).
func Apply(ctx context.Context, dyn dynamic.Interface, api ReportAPI, scope string, reports []*unstructured.Unstructured) ([]string, error) {
	skipped, err := write(ctx, dyn, api, reports)
	if err != nil {
		return skipped, err
	}
	keep := map[string]bool{}
	for _, r := range reports {
		keep[r.GetNamespace()] = true
	}
	opts := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=" + ReportSource, Limit: 500}
	for {
		l, err := dyn.Resource(api.GVR).Namespace(scope).List(ctx, opts)
		if err != nil {
			return skipped, fmt.Errorf("list the %ss of earlier audits: %w", api.Kind, err)
		}
		for _, old := range l.Items {
			if old.GetName() != ReportName || keep[old.GetNamespace()] {
				continue
			}
			err := dyn.Resource(api.GVR).Namespace(old.GetNamespace()).Delete(ctx, old.GetName(),
				metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptrUID(old.GetUID())}})
			if err != nil && !apierrors.IsNotFound(err) {
				return skipped, fmt.Errorf("delete the stale %s %s/%s: %w", api.Kind, old.GetNamespace(), old.GetName(), err)
			}
		}
		if l.GetContinue() == "" {
			return skipped, nil
		}
		opts.Continue = l.GetContinue()
	}
}

func ptrUID(u types.UID) *types.UID { return &u }

// write creates every report, or replaces the one of the same name; it
// skips, and names, the namespaces that are gone or being deleted.
func write(ctx context.Context, dyn dynamic.Interface, api ReportAPI, reports []*unstructured.Unstructured) ([]string, error) {
	var skipped []string
	for _, rep := range reports {
		c := dyn.Resource(api.GVR).Namespace(rep.GetNamespace())
		if err := writeOne(ctx, c, api.Kind+" "+rep.GetNamespace()+"/"+rep.GetName(), rep); err != nil {
			if namespaceGone(err) {
				skipped = append(skipped, rep.GetNamespace())
				continue
			}
			return skipped, err
		}
	}
	return skipped, nil
}

// namespaceGone tells whether err refused a write because its namespace is
// being deleted or no longer exists.
func namespaceGone(err error) bool {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && apierrors.IsNotFound(err) {
		d := status.Status().Details
		return d != nil && d.Kind == "namespaces"
	}
	return false
}

// writeOne creates a report, or replaces the one of the same name.
func writeOne(ctx context.Context, c dynamic.ResourceInterface, what string, rep *unstructured.Unstructured) error {
	_, err := c.Create(ctx, rep, metav1.CreateOptions{FieldManager: ReportSource})
	if apierrors.IsAlreadyExists(err) {
		old, gerr := c.Get(ctx, rep.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("read %s: %w", what, gerr)
		}
		rep = rep.DeepCopy()
		rep.SetResourceVersion(old.GetResourceVersion())
		_, err = c.Update(ctx, rep, metav1.UpdateOptions{FieldManager: ReportSource})
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}
