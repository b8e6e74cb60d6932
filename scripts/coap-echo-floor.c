/* The floor for a CoAP server's CPU per request (issue #18): a bare echo program that answers every
 * datagram with a fixed 2.05 Content, batching its system calls (recvmmsg/sendmmsg). It parses nothing
 * beyond the 4-byte header and the token: a CON request gets a piggybacked ACK with its Message ID, a NON
 * one a NON with the same Message ID, both with the request's token, Content-Format 0 and a payload of
 * PAYLOAD_LEN bytes (default 88: the size of `corral serve`'s answer to GET /, so the bytes on the wire
 * match). It keeps no state, no dedup, no routing, no timers: what a real server costs above it is the
 * price of being one.
 *
 * Build: cc -O2 -o coap-echo-floor scripts/coap-echo-floor.c
 * Run:   coap-echo-floor 127.0.0.1 5683 [PAYLOAD_LEN]       (runs until killed)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define BATCH 32
#define MAX_DGRAM 1500

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s ADDR PORT [PAYLOAD_LEN]\n", argv[0]);
        return 2;
    }
    int payload_len = argc > 3 ? atoi(argv[3]) : 88;
    if (payload_len < 0 || payload_len > 1024) payload_len = 88;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
    if (fd < 0 || inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("coap-echo-floor: bind");
        return 1;
    }
    int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);

    static unsigned char in[BATCH][MAX_DGRAM], out[BATCH][MAX_DGRAM];
    static struct sockaddr_in peers[BATCH];
    static struct iovec in_iov[BATCH], out_iov[BATCH];
    static struct mmsghdr in_msgs[BATCH], out_msgs[BATCH];
    for (int i = 0; i < BATCH; i++) {
        in_iov[i] = (struct iovec){.iov_base = in[i], .iov_len = MAX_DGRAM};
        in_msgs[i].msg_hdr = (struct msghdr){.msg_name = &peers[i], .msg_iov = &in_iov[i], .msg_iovlen = 1};
        out_iov[i].iov_base = out[i];
        out_msgs[i].msg_hdr = (struct msghdr){.msg_name = &peers[i], .msg_iov = &out_iov[i], .msg_iovlen = 1};
    }
    for (;;) {
        for (int i = 0; i < BATCH; i++) in_msgs[i].msg_hdr.msg_namelen = sizeof peers[i];
        int n = recvmmsg(fd, in_msgs, BATCH, MSG_WAITFORONE, NULL);
        if (n <= 0) continue;
        int m = 0;
        for (int i = 0; i < n; i++) {
            unsigned char *q = in[i];
            unsigned len = in_msgs[i].msg_len;
            unsigned tkl = len >= 4 ? q[0] & 0x0f : 99;
            if (len < 4 + tkl || tkl > 8 || (q[0] >> 6) != 1 || (q[0] & 0x20) || q[1] < 1 || q[1] > 31) continue; /* not a request */
            unsigned char *r = out[m];
            r[0] = (unsigned char)(0x40 | ((q[0] & 0x30) == 0 ? 0x20 : 0x10) | tkl); /* CON->ACK, NON->NON */
            r[1] = 0x45;                                                           /* 2.05 Content */
            r[2] = q[2];
            r[3] = q[3];
            memcpy(r + 4, q + 4, tkl);
            size_t k = 4 + tkl;
            r[k++] = 0xc0; /* Content-Format (12), empty: text/plain */
            if (payload_len > 0) {
                r[k++] = 0xff;
                memset(r + k, 'x', (size_t)payload_len);
                k += (size_t)payload_len;
            }
            out_iov[m].iov_len = k;
            out_msgs[m].msg_hdr.msg_name = &peers[i];
            out_msgs[m].msg_hdr.msg_namelen = in_msgs[i].msg_hdr.msg_namelen;
            m++;
        }
        for (int sent = 0; sent < m;) {
            int s = sendmmsg(fd, out_msgs + sent, (unsigned)(m - sent), 0);
            if (s <= 0) break;
            sent += s;
        }
    }
}
