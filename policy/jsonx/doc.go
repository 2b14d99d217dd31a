// Package jsonx is the JSON reading and writing that the policy and the
// host's tools share: strings decoded and written exactly as Go's
// encoding/json does (and so as the API server and YuniKorn), field paths
// for messages, and the error that names a malformed field. It works on
// raw JSON through gjson, without reflection, for the policy module
// (TinyGo).
package jsonx
