package queues

import "testing"

// FuzzCheck: no text makes the configuration check panic in this package's
// own code (yaml.v3's parse errors are its panics, recovered natively; in
// the module they trap, docs/BEHAVIOUR.md §3.9).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"partitions: [{name: default, queues: [{name: root}]}]",
		"partitions: [{queues: [{name: root, limits: [{limit: a, users: ['*', b], maxresources: {memory: 1G}}], queues: [{name: a, resources: {guaranteed: {vcore: 1}, max: {vcore: 500m}}}]}]}]",
		"base: &b {name: root}\npartitions: [{queues: [{<<: *b, submitacl: '*'}]}]",
		"partitions: [{queues: [&q {name: root, queues: [*q]}]}]",
		"partitions: [{queues: [{name: root}], placementrules: [{name: fixed, value: root.a, parent: {name: user}}], nodesortpolicy: {type: fair, resourceweights: {vcore: -1}}, limits: [{limit: x}]}]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Check([]byte(s))
	})
}
