// Package artifacthub generates the Artifact Hub metadata of a Kubewarden
// policy from its metadata.yml: the package file artifacthub-pkg.yml and
// the repository file artifacthub-repo.yml, as `kwctl scaffold artifacthub`
// derives them from the policy's annotations.
//
// The output depends only on the inputs: no clock is read (the creation
// time is an input) and every map is written in a fixed order, so generated
// files can be committed and checked for drift.
//
// See https://artifacthub.io/docs/topics/repositories/kubewarden-policies/
// and https://github.com/artifacthub/hub/blob/master/docs/metadata/artifacthub-pkg.yml
package artifacthub
