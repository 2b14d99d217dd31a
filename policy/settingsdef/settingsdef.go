// Package settingsdef is the one description of the policy's settings:
// each key with its type, default, meaning, an example the policy accepts
// and the JSON Schema the chart checks its value with. The reference table
// in docs/SETTINGS.md and the settings part of the chart's
// values.schema.json are generated from it (make generate; make verify
// fails on drift), and the policy's unknown-key message is checked against
// it. Pure data: the guest may import it under TinyGo.
package settingsdef

// Setting describes one top-level settings key.
type Setting struct {
	// Key as operators write it, camelCase.
	Key string
	// Type, Default and Meaning are the columns of the reference table
	// (Markdown; a literal | is written \|).
	Type, Default, Meaning string
	// Example is a JSON value the policy accepts for the key; tests run it
	// through the policy and, when Schema is set, through the schema.
	Example string
	// Schema is the JSON Schema of the value in the chart's
	// values.schema.json (settings.properties.<Key>), in any layout: the
	// generator re-indents it. Empty: the chart does not take the key as a
	// value (it sets it itself) and its schema refuses it.
	Schema string
}

// Shared schema fragments.
const (
	boolean = `{"type": "boolean"}`
	// regexList: an array of RE2 patterns, or one comma-separated string.
	// One schema for both forms, not a oneOf: a pattern that does not
	// compile is then reported with the compile error alone ("format"
	// applies to strings, "items" to arrays), not as "none matched".
	regexList = `{
		"type": ["array", "string"],
		"format": "regex",
		"items": {"type": "string", "format": "regex"}
	}`
)

// All lists every key in the order of the policy's unknown-key message. A
// new setting is one entry appended here, then make generate.
var All = []Setting{
	{
		Key:     "bypassAuth",
		Type:    "bool",
		Default: "`false`",
		Meaning: "anyone may supply the annotation; with the legacy label set, nothing is added",
		Example: `true`,
		Schema:  boolean,
	},
	{
		Key:     "trustControllers",
		Type:    "bool",
		Default: "`true`",
		Meaning: "users matching `systemUsers` may supply it",
		Example: `false`,
		Schema:  boolean,
	},
	{
		Key:     "systemUsers",
		Type:    "regex list",
		Default: "`[\"^system:serviceaccount:kube-system:\", \"^system:kube-controller-manager$\"]`",
		Meaning: "controller identities",
		Example: `["^system:serviceaccount:kube-system:"]`,
		Schema:  regexList,
	},
	{
		Key:     "externalUsers",
		Type:    "regex list",
		Default: "`[]`",
		Meaning: "front-ends that submit on behalf of users",
		Example: `"^system:serviceaccount:spark:livy$"`,
		Schema:  regexList,
	},
	{
		Key:     "externalGroups",
		Type:    "regex list",
		Default: "`[]`",
		Meaning: "groups whose members may supply it",
		Example: `["^notebook-frontends$"]`,
		Schema:  regexList,
	},
	{
		Key:     "userLabelKey",
		Type:    "string",
		Default: "`yunikorn.apache.org/username`",
		Meaning: "the deprecated legacy user label",
		Example: `"example.com/user"`,
		Schema: `{
			"type": "string",
			"minLength": 1
		}`,
	},
	{
		Key:     "validateOnly",
		Type:    "bool",
		Default: "`false`",
		Meaning: "the validating twin: refuse where the rules would change the object (docs/BEHAVIOUR.md §4.9); the chart sets it on its validating registration itself, so it is not a chart value",
		Example: `true`,
	},
	{
		Key:     "trustRBAC",
		Type:    "bool or `{verb, group, resource, groupsResource, acceptWildcardGrants, maxGroups}`",
		Default: "`false`",
		Meaning: "also trust a submitter that RBAC allows verb `set` on `userinfos.yunikorn.apache.org` named for the claimed user, and on `usergroups.yunikorn.apache.org` for each claimed group (at most 32), in the request's namespace, by a rule that names them: a grant through `*` (cluster-admin, `system:masters`) counts only with `acceptWildcardGrants: true` (docs/BEHAVIOUR.md §3.1)",
		Example: `true`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.1: true, or the access the SubjectAccessReviews ask, whether wildcard grants count, and the most groups a claim may carry",
			"oneOf": [
				{
					"type": "boolean"
				},
				{
					"type": "object",
					"additionalProperties": false,
					"properties": {
						"verb": {
							"type": "string",
							"minLength": 1,
							"pattern": "^[^/ ]+$"
						},
						"group": {
							"type": "string",
							"pattern": "^[^/ ]*$"
						},
						"resource": {
							"type": "string",
							"minLength": 1,
							"pattern": "^[^/ ]+$"
						},
						"groupsResource": {
							"type": "string",
							"minLength": 1,
							"pattern": "^[^/ ]+$"
						},
						"acceptWildcardGrants": {
							"type": "boolean"
						},
						"maxGroups": {
							"type": "integer",
							"minimum": 0,
							"maximum": 256
						}
					}
				}
			]
		}`,
	},
	{
		Key:     "queueCheck",
		Type:    "`enforce`, `warn`, `off`, or `{mode, namespace, partition, schedulerName, policyGroup}`",
		Default: "`off`",
		Meaning: "refuse (or warn about) a new pod that YuniKorn's placement rules and queue ACLs will reject, read from YuniKorn's own `yunikorn-configs` (docs/BEHAVIOUR.md §3.2, docs/QUEUES.md)",
		Example: `"warn"`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.2: a mode, or the mode and where YuniKorn's configuration is",
			"oneOf": [
				{
					"type": "string",
					"enum": [
						"enforce",
						"warn",
						"off"
					]
				},
				{
					"type": "object",
					"additionalProperties": false,
					"required": [
						"mode"
					],
					"properties": {
						"mode": {
							"type": "string",
							"enum": [
								"enforce",
								"warn",
								"off"
							]
						},
						"namespace": {
							"type": "string",
							"minLength": 1,
							"pattern": "^\\S+$"
						},
						"partition": {
							"type": "string",
							"minLength": 1,
							"pattern": "^\\S+$"
						},
						"schedulerName": {
							"type": "string",
							"minLength": 1,
							"pattern": "^\\S+$"
						},
						"policyGroup": {
							"type": "string",
							"minLength": 1,
							"pattern": "^\\S+$"
						}
					}
				}
			]
		}`,
	},
	{
		Key:     "configValidation",
		Type:    "`enforce`, `warn`, `off`, or `{mode, namespace}` (namespace: `yunikorn`)",
		Default: "`off`",
		Meaning: "refuse (or warn about) an edit of `yunikorn-configs` or `yunikorn-defaults` whose queue configuration the scheduler would refuse to load, with the scheduler's own message, without calling the scheduler; needs its own registration (docs/BEHAVIOUR.md §3.10)",
		Example: `{"mode": "warn", "namespace": "yunikorn"}`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.9: a mode, or the mode and YuniKorn's namespace",
			"oneOf": [
				{
					"type": "string",
					"enum": [
						"enforce",
						"warn",
						"off"
					]
				},
				{
					"type": "object",
					"additionalProperties": false,
					"required": [
						"mode"
					],
					"properties": {
						"mode": {
							"type": "string",
							"enum": [
								"enforce",
								"warn",
								"off"
							]
						},
						"namespace": {
							"type": "string",
							"minLength": 1,
							"pattern": "^\\S+$"
						}
					}
				}
			]
		}`,
	},
	{
		Key:     "workloads",
		Type:    "list of presets (`kuberay`, `spark`, `kubeflow-training`, `kubeflow-trainer`, `jobset`, `leaderworkerset`) or `{preset \\| group, kind, paths; operators, owners}`",
		Default: "`[]`",
		Meaning: "guard custom kinds at the resource the user submits, every pod template stamped; trust their operators only to copy the identity an owner records (docs/BEHAVIOUR.md §3.3, §3.4)",
		Example: `["spark"]`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.3, §3.4: presets by name, or {preset, operators}, or a custom kind {group, version, kind, resource, paths, operators, owners}",
			"type": "array",
			"items": {
				"oneOf": [
					{
						"type": "string",
						"enum": [
							"kuberay",
							"spark",
							"kubeflow-training",
							"kubeflow-trainer",
							"jobset",
							"leaderworkerset"
						]
					},
					{
						"type": "object",
						"additionalProperties": false,
						"required": [
							"preset"
						],
						"properties": {
							"preset": {
								"type": "string",
								"enum": [
									"kuberay",
									"spark",
									"kubeflow-training",
									"kubeflow-trainer",
									"jobset",
									"leaderworkerset"
								]
							},
							"operators": {
								"type": ["array", "string"],
								"format": "regex",
								"items": {
									"type": "string",
									"minLength": 1,
									"format": "regex"
								}
							}
						}
					},
					{
						"type": "object",
						"additionalProperties": false,
						"required": [
							"kind",
							"version",
							"resource",
							"paths"
						],
						"properties": {
							"group": {
								"type": "string"
							},
							"version": {
								"type": "string",
								"minLength": 1
							},
							"kind": {
								"type": "string",
								"minLength": 1
							},
							"resource": {
								"type": "string",
								"minLength": 1
							},
							"paths": {
								"type": "array",
								"minItems": 1,
								"items": {
									"type": "string",
									"pattern": "\\.annotations$"
								}
							},
							"operators": {
								"type": ["array", "string"],
								"format": "regex",
								"items": {
									"type": "string",
									"minLength": 1,
									"format": "regex"
								}
							},
							"owners": {
								"type": "array",
								"items": {
									"type": "string",
									"minLength": 1
								}
							}
						}
					}
				]
			}
		}`,
	},
	{
		Key:     "trustPodTokens",
		Type:    "bool",
		Default: "`false`",
		Meaning: "a Pod created with the bound token of the Pod that is its controller (a Spark executor and its driver) may carry that Pod's identity (docs/BEHAVIOUR.md §3.4)",
		Example: `true`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.4: a Pod created with the bound token of the Pod that is its controller may carry that Pod's identity",
			"type": "boolean"
		}`,
	},
	{
		Key:     "applicationOwnership",
		Type:    "`enforce`, `warn`, `off`, or `{mode, schedulerName, generateUniqueAppIds, completingTimeout}`",
		Default: "`off`",
		Meaning: "refuse (or warn about) a Pod that joins, when created, un-gated or relabelled, a YuniKorn application whose Pods, in any namespace, belong to another user (a finished or deleted Pod for `completingTimeout`, default `30s`, and a 2 s margin); Pods without an ID join their namespace's generated application (docs/BEHAVIOUR.md §3.5). Under `serve` a check asks the host's index of application owners (kept by the Pod watch cache for the settings `serve` starts with; a finished or deleted Pod as long): its cost does not grow with the cluster. Under policy-server each check reads every Pod of the scheduler (§3.5)",
		Example: `"warn"`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.5: refuse (enforce) or warn about a Pod that joins another user's YuniKorn application",
			"oneOf": [
				{
					"type": "string",
					"enum": [
						"enforce",
						"warn",
						"off"
					]
				},
				{
					"type": "object",
					"additionalProperties": false,
					"required": [
						"mode"
					],
					"properties": {
						"mode": {
							"type": "string",
							"enum": [
								"enforce",
								"warn",
								"off"
							]
						},
						"schedulerName": {
							"type": "string",
							"minLength": 1
						},
						"generateUniqueAppIds": {
							"type": "boolean"
						},
						"completingTimeout": {
							"description": "how long yunikorn-core keeps an application after its last Pod finished (its completingTimeout): a Go duration of zero or more, such as 30s",
							"type": "string",
							"pattern": "^\\+?(0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
						}
					}
				}
			]
		}`,
	},
	{
		Key:     "recordedGroups",
		Type:    "`{omit}` or `{include, exclude}` (regex lists)",
		Default: "every group",
		Meaning: "which of the submitter's groups the annotation records: `exclude: [\"^system:.*$\"]` drops the `system:` groups, `include` is an allow-list, `omit: true` writes none so that YuniKorn resolves them (LDAP, host database); only groups from `request.userInfo`, never added to (docs/BEHAVIOUR.md §3.6)",
		Example: `{"exclude": ["^system:.*$"]}`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.6: which of the submitter's groups the annotation records",
			"oneOf": [
				{
					"type": "null"
				},
				{
					"type": "object",
					"additionalProperties": false,
					"properties": {
						"omit": {
							"type": "boolean"
						},
						"include": ` + regexList + `,
						"exclude": ` + regexList + `
					}
				}
			]
		}`,
	},
	{
		Key:     "schedulerUsers",
		Type:    "regex list",
		Default: "`[\"^system:serviceaccount:yunikorn:yunikorn-admin$\"]`",
		Meaning: "the YuniKorn scheduler's identities (its chart's service account in the namespace `yunikorn`): a gang placeholder it creates carries its originator Pod's identity, and the queue and ownership checks skip it (docs/BEHAVIOUR.md §3.7)",
		Example: `["^system:serviceaccount:yunikorn:yunikorn-admin$"]`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.7: the YuniKorn scheduler's identities, whose gang placeholders carry their originator Pod's identity",
			"type": ["array", "string"],
			"format": "regex",
			"items": {
				"type": "string",
				"format": "regex"
			}
		}`,
	},
	{
		Key:     "scheduling",
		Type:    "`null` or `{schedulerName, processNamespaces, bypassNamespaces, labelNamespaces, noLabelNamespaces, generateUniqueAppIds, namespaceAnnotations, preemption}`",
		Default: "`null` (off)",
		Meaning: "also do YuniKorn's admission controller's other jobs on Pod CREATE, with its semantics: `spec.schedulerName: yunikorn` in processed namespaces (not `app: yunikorn` Pods), application ID labels and `allow-preemption` from the PriorityClass in labelled ones, `ignore-application` in the others; the namespace annotations `namespace.enableYuniKorn` and `namespace.generateAppId` override the lists; `{}` is YuniKorn's defaults (`bypassNamespaces: [\"^kube-system$\"]`) (docs/BEHAVIOUR.md §3.10)",
		Example: `{}`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.10: YuniKorn's admission controller's other jobs on Pod CREATE (schedulerName, application ID labels, allow-preemption, ignore-application); absent or null: off, {}: YuniKorn's defaults",
			"oneOf": [
				{
					"type": "null"
				},
				{
					"type": "object",
					"additionalProperties": false,
					"properties": {
						"schedulerName": {
							"type": "string",
							"minLength": 1
						},
						"processNamespaces": ` + regexList + `,
						"bypassNamespaces": ` + regexList + `,
						"labelNamespaces": ` + regexList + `,
						"noLabelNamespaces": ` + regexList + `,
						"generateUniqueAppIds": {
							"type": "boolean"
						},
						"namespaceAnnotations": {
							"type": "boolean"
						},
						"preemption": {
							"type": "boolean"
						}
					}
				}
			]
		}`,
	},
	{
		Key:     "followYuniKornConfig",
		Type:    "bool or `{namespace}` (namespace: `yunikorn`)",
		Default: "`false`",
		Meaning: "follow the `admissionController.accessControl.*` keys (and, with `scheduling`, `admissionController.filtering.*`) of YuniKorn's `yunikorn-configs` over `yunikorn-defaults` live, mapped as `migrate` maps them: a key they set wins over this file, one they do not set keeps this file's value; an edit applies at the next request. `bypassAuth: \"true\"` there (YuniKorn's admission controller handed over) is never followed; a value YuniKorn cannot use, or ConfigMaps that cannot be read, keep the value last read (else this file's) and every answer warns (docs/BEHAVIOUR.md §3.11)",
		Example: `true`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §3.11: follow the admissionController.* keys of YuniKorn's ConfigMaps live (true: in namespace yunikorn), or the namespace to read them in",
			"oneOf": [
				{
					"type": "boolean"
				},
				{
					"type": "object",
					"additionalProperties": false,
					"properties": {
						"namespace": {
							"type": "string",
							"minLength": 1,
							"pattern": "^[^\\s/]+$"
						}
					}
				}
			]
		}`,
	},
	{
		Key:     "adopters",
		Type:    "`null` or `{users, groups}` (regex lists)",
		Default: "`null` (no one)",
		Meaning: "who may record the owner of an object created before the policy (one that records no `user.info` anywhere), by an UPDATE through the API server: `users` match the username (a service account is `system:serviceaccount:<namespace>:<name>`), `groups` any group; an owned object is never adopted again; `yunikorn-userinfo audit -o adopt` prints the command for every object to adopt (docs/BEHAVIOUR.md §4.13)",
		Example: `{"users": ["^system:serviceaccount:platform:adopter$"]}`,
		Schema: `{
			"description": "docs/BEHAVIOUR.md §4.13: the users (service accounts as system:serviceaccount:NAMESPACE:NAME) and groups trusted to record the owner of an object created before the policy",
			"oneOf": [
				{
					"type": "null"
				},
				{
					"type": "object",
					"additionalProperties": false,
					"properties": {
						"users": ` + regexList + `,
						"groups": ` + regexList + `
					}
				}
			]
		}`,
	},
}

// Keys returns every key, in the order of All.
func Keys() []string {
	keys := make([]string, len(All))
	for i, s := range All {
		keys[i] = s.Key
	}
	return keys
}
