// Package nflog reads the packets a gensee table logs (nftables `log group
// N`) from nfnetlink_log inside the container's network namespace, with
// mdlayher/netlink only, and turns each into an Attempt: when, which
// destination ("ip:port/proto"), and the rule's log prefix.
//
// NFLOG is lossy by design (the log rule is rate-limited, the socket can
// overrun): an Attempt is a sample, the table's deny counter is the count.
// Lost() says when the socket overran. The reader only listens; it never
// changes a table or a verdict, and it binds only the group it is given.
// The packets it parses are container-controlled input: the parser checks
// every length and never panics (fuzzed).
package nflog
