// Package certwatch serves TLS from a certificate and key file that are
// replaced while the process runs, as cert-manager does, and optionally
// requires client certificates issued by a CA read from a file that is
// reloaded the same way.
//
// A [Watcher] loads the files once in [New] and then polls their contents
// ([Watcher.Run], or [Watcher.Reload] for one poll). It compares file
// contents, not file events: in Kubernetes a Secret volume is updated by
// atomically swapping a `..data` symlink, which a watch on the file path
// does not see, and a rename-over does not always fire the event a watcher
// registered on the old inode expects. Reading the bytes behind the path
// sees every kind of update.
//
// A reload that fails (a half-written file, a new certificate with the old
// key, garbage) is logged once per distinct content and leaves the previous
// certificate in force; the next poll tries again, so a later fix is picked
// up. [Watcher.TLSConfig] serves whatever is current, so the server never
// restarts.
//
// The package also holds a small certificate authority, [CA], for tests,
// developer modes that need a self-signed certificate, and end-to-end
// tests: ECDSA P-256 keys, random serials, SANs and key usages set.
package certwatch
