package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/audit"
	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// adoptFlags are the flags of `adopt`.
type adoptFlags struct {
	namespace string
	owner     string
	groups    []string
}

func newAdoptCommand(a *app) *cobra.Command {
	f := &adoptFlags{}
	cmd := &cobra.Command{
		Use:   "adopt KIND[.GROUP]/NAME -n NAMESPACE --owner USER [--groups GROUP,...]",
		Short: "Print the kubectl command that records the owner of an object created before the policy",
		Long: `Print the kubectl patch that an adopter (an identity of the policy's
settings.adopters, docs/BEHAVIOUR.md §4.13) runs to record USER, with
GROUPS, as the owner of an object that records none: the user.info value
written as the policy writes it (compact JSON, escaped as encoding/json
does), where the policy reads it for the kind:

  pod                               metadata.annotations
  deployment, replicaset,
  statefulset, daemonset, job,
  replicationcontroller             spec.template.metadata.annotations
  cronjob                           spec.jobTemplate.spec.template.metadata.annotations
  any other KIND.GROUP              metadata.annotations (the policy copies it to
                                    every template the kind's workloads entry covers)

Nothing is sent: run the command as the adopter. audit -o adopt lists the
objects to adopt.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			line, err := adoptCommand(args[0], f)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, line)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.namespace, "namespace", "n", "", "the object's namespace; required")
	fs.StringVar(&f.owner, "owner", "", "the owner's username, as the API server authenticates it; required")
	fs.StringSliceVar(&f.groups, "groups", nil, "the owner's groups, in order (none: YuniKorn resolves them)")
	return cmd
}

// builtinKinds are the kinds the policy guards without settings, by the
// name kubectl takes (lower case), with their group and kind.
var builtinKinds = map[string][2]string{
	"pod": {"", "Pod"}, "replicationcontroller": {"", "ReplicationController"},
	"deployment": {"apps", "Deployment"}, "replicaset": {"apps", "ReplicaSet"},
	"statefulset": {"apps", "StatefulSet"}, "daemonset": {"apps", "DaemonSet"},
	"job": {"batch", "Job"}, "cronjob": {"batch", "CronJob"},
}

// adoptCommand builds the kubectl command for target (KIND[.GROUP]/NAME).
func adoptCommand(target string, f *adoptFlags) (string, error) {
	res, name, ok := strings.Cut(target, "/")
	switch {
	case !ok || res == "" || name == "" || strings.Contains(name, "/"):
		return "", fmt.Errorf("adopt: the object %q: want KIND[.GROUP]/NAME, like deployment.apps/web or sparkapplication.sparkoperator.k8s.io/spark-pi", target)
	case f.namespace == "":
		return "", errors.New("adopt: give the object's namespace with -n")
	case f.owner == "":
		return "", errors.New("adopt: give the owner's username with --owner")
	}
	kind, group, _ := strings.Cut(strings.ToLower(res), ".")
	var path []string
	if b, ok := builtinKinds[kind]; ok && (group == "" || group == b[0]) {
		path = audit.AdoptionPath(b[0], b[1])
		res = kind
		if b[0] != "" {
			res += "." + b[0]
		}
	} else {
		if group == "" {
			return "", fmt.Errorf("adopt: %q is not a kind the policy guards without settings: name its group, KIND.GROUP/NAME (sparkapplication.sparkoperator.k8s.io/spark-pi)", kind)
		}
		path = audit.AdoptionPath(group, kind)
	}
	v := struct {
		User   string   `json:"user"`
		Groups []string `json:"groups,omitempty"`
	}{f.owner, f.groups}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("adopt: encode the owner: %w", err)
	}
	if err := userinfo.Check(string(b)); err != nil {
		return "", fmt.Errorf("adopt: the owner %s: %w", b, err)
	}
	return audit.KubectlPatch(res, f.namespace, name, audit.AdoptionPatch(string(b), path)), nil
}
