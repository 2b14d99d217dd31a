package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adopt prints the command that records the owner where the policy reads
// it for the kind, the value written as the policy writes it.
func TestAdopt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"adopt", "deployment/web", "-n", "team", "--owner", "alice", "--groups", "dev,system:authenticated"},
			`kubectl patch deployment.apps web -n team --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"alice\",\"groups\":[\"dev\",\"system:authenticated\"]}"}}}}}'`},
		{[]string{"adopt", "Pod/lone", "-n", "team", "--owner", "o'brien"},
			`kubectl patch pod lone -n team --type=merge -p '{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"o'\''brien\"}"}}}'`},
		{[]string{"adopt", "cronjob.batch/nightly", "-n", "team", "--owner", "a<b"},
			`kubectl patch cronjob.batch nightly -n team --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"a\\u003cb\"}"}}}}}}}'`},
		{[]string{"adopt", "sparkapplication.sparkoperator.k8s.io/spark-pi", "-n", "team", "--owner", "alice"},
			`kubectl patch sparkapplication.sparkoperator.k8s.io spark-pi -n team --type=merge -p '{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"alice\"}"}}}'`},
		{[]string{"adopt", "job.example.com/j", "-n", "team", "--owner", "alice"},
			`kubectl patch job.example.com j -n team --type=merge -p '{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"alice\"}"}}}'`},
	} {
		res := runCLI(t, "", tc.args...)
		require.Equal(t, 0, res.code, "%v: %s", tc.args, res.stderr)
		assert.Equal(t, tc.want+"\n", res.stdout, tc.args)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"adopt", "web", "-n", "team", "--owner", "alice"}, `adopt: the object "web": want KIND[.GROUP]/NAME`},
		{[]string{"adopt", "deployment/web", "--owner", "alice"}, "adopt: give the object's namespace with -n"},
		{[]string{"adopt", "deployment/web", "-n", "team"}, "adopt: give the owner's username with --owner"},
		{[]string{"adopt", "sparkapplication/x", "-n", "team", "--owner", "alice"}, `adopt: "sparkapplication" is not a kind the policy guards without settings: name its group`},
	} {
		res := runCLI(t, "", tc.args...)
		assert.NotEqual(t, 0, res.code, tc.args)
		assert.Contains(t, res.stderr, tc.want, tc.args)
	}
}
