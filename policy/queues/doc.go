// Package queues works out where YuniKorn will place an application and
// whether its queue ACLs let the submitter in, from the same queues.yaml
// the scheduler reads, the way yunikorn-core v1.9 does it: the
// configuration's parsing and the validation that decides whether the
// scheduler accepts it, the queue hierarchy with its submit and admin
// ACLs, the placement rules (provided, user, tag, fixed; their create
// flags, parent rules and filters) and the default-queue fallback.
//
// It is written for the policy module (TinyGo: no goroutines, regular
// expressions compiled once per configuration) and is tested against
// yunikorn-core itself on generated configurations (test/yunikorn).
// docs/QUEUES.md describes what it models and what it leaves out.
package queues
