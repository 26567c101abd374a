/* ctl.h: the control protocol between sluice (CLI) and sluiced.
 *
 * A stream connection on a unix socket (default CTL_SOCKET_DEFAULT, mode
 * 0660, the daemon checks SO_PEERCRED: uid 0 or the socket's group). One
 * request per connection: the client writes one JSON object followed by
 * "\n" (at most CTL_MSG_MAX bytes) and reads one JSON object followed by
 * "\n" back (at most CTL_REPLY_MAX), then both close.
 *
 * Requests ("cmd" selects; other members as listed):
 *   {"cmd":"sandbox.add","name":N,"policy":TEXT,"origin":FILE[,"netns":PATH]}
 *   {"cmd":"sandbox.del","name":N}
 *   {"cmd":"sandbox.list"[,"name":N]}   (with a name: that one, or none)
 *   {"cmd":"policy.set","name":N,"policy":TEXT,"origin":FILE}
 *   {"cmd":"status"}
 * TEXT is the policy file's content, FILE its name (used in error
 * positions "FILE:line:col: ...").
 *
 * Replies: {"ok":true, ...} or {"ok":false,"error":MESSAGE,"code":CODE}
 * with CODE "invalid" (bad request or input: the CLI exits 1) or "failed"
 * (the operation failed: exit 2).
 *   sandbox.add  -> {"ok":true,"sandbox":SANDBOX}
 *   sandbox.list -> {"ok":true,"sandboxes":[SANDBOX...]}
 *   policy.set   -> {"ok":true,"sandbox":SANDBOX}
 *   status       -> {"ok":true,"version":V,"sandboxes":N,"netns":GW,
 *                    "queue":{...counters},"store":{...counters}}
 * SANDBOX = {"name":N,"ifname":GW_SIDE_IFNAME,"addr":"10.213.0.2/30",
 *            "gateway":"10.213.0.1","netns":"/run/netns/N","mode":"enforce",
 *            "policy_sha256":HEX,"created_us":T}
 */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#define CTL_SOCKET_DEFAULT	"/run/sluice/ctl.sock"
#define CTL_MSG_MAX		(2 * 1024 * 1024)	/* a policy is at most 1 MiB */
/* A reply may be longer: the list of a full pool (16,384 sandboxes of some
 * 330 bytes) is 5.4 MB, and outgrew CTL_MSG_MAX at some 6,400 (found by
 * review, 2026-12-03). */
#define CTL_REPLY_MAX		(32 * 1024 * 1024)
#define CTL_TIMEOUT_MS		10000

/* CLI exit codes, a contract for scripts. */
#define EXIT_OK		0
#define EXIT_USAGE	1	/* usage error or invalid input */
#define EXIT_FAILED	2	/* the operation failed */
#define EXIT_UNREACHABLE 3	/* no daemon at the socket */

#define SLUICE_VERSION	"0.1.0"

#endif
