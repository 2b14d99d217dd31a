package queues

import "errors"

// Errors of core's ConvertUGI, which reject the application before any
// placement rule runs.
var (
	ErrEmptyUser   = errors.New("empty user cannot resolve")
	ErrInvalidUser = errors.New("invalid username, it contains invalid characters")
)

// Identity is the user and groups core checks ACLs against, from what the
// shim sends (the user.info annotation's user and groups), as core's
// ConvertUGI makes it for an application that is not force-created:
//
//   - no user: rejected;
//   - groups given: the user name must match core's user pattern, and the
//     groups are used as given;
//   - no groups: the partition's resolver finds them; with the default (no
//     resolver) the one group is the user's name. known is false for the
//     os, ldap and test resolvers, whose answers depend on the scheduler's
//     host, and for any user whose groups core may have cached from an
//     earlier application (it keeps them 5 minutes): the check then cannot
//     be made.
func (p *Partition) Identity(user string, groups []string) (u User, known bool, err error) {
	if user == "" {
		return User{}, true, ErrEmptyUser
	}
	if len(groups) == 0 {
		switch p.resolver {
		case "os", "ldap", "test":
			return User{Name: user}, false, nil
		}
		return User{Name: user, Groups: []string{user}}, true, nil
	}
	if !userRegExp.MatchString(user) {
		return User{}, true, ErrInvalidUser
	}
	return User{Name: user, Groups: append([]string(nil), groups...)}, true, nil
}
