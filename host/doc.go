// Package host is the generic half of the project: a Kubewarden waPC host on
// wazero that runs any policy module (engine), answers admission reviews
// (admission, webhook), serves the cluster to a policy (kubecap), and reads
// module metadata, settings and certificates. Nothing below host/ knows
// about YuniKorn: the policy
// (policy/), its shared rule packages and the YuniKorn tools
// (internal/yunikorn/) are imported only by cmd/. TestImportBoundary keeps
// it so.
package host
