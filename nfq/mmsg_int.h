/* mmsg_int.h: the vector one recvmmsg of datagrams reads into (queue.c,
 * fastsyn.c, ct.c), each datagram its own buffer. */
#ifndef SLUICE_NFQ_MMSG_INT_H
#define SLUICE_NFQ_MMSG_INT_H

#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/*
 * Points msgs[i] at bufs + i * size (size bytes) for i < n, with the
 * sender's address into from[i] when from is not NULL. Again before each
 * call: recvmmsg writes the lengths and flags into msgs.
 */
static inline void
nfq_mmsg_prepare(struct mmsghdr *msgs, struct iovec *iov, char *bufs,
    size_t size, unsigned n, void *from, size_t fromlen)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		iov[i].iov_base = bufs + (size_t)i * size;
		iov[i].iov_len = size;
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
		if (from != NULL) {
			msgs[i].msg_hdr.msg_name = (char *)from +
			    (size_t)i * fromlen;
			msgs[i].msg_hdr.msg_namelen = (socklen_t)fromlen;
		}
	}
}

#endif
