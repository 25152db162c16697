/* sd_notify without libsystemd: one datagram to $NOTIFY_SOCKET. */
#ifndef O1_NOTIFY_H
#define O1_NOTIFY_H

/* Sends STATE (e.g. "READY=1") when NOTIFY_SOCKET is set; returns 1 when
 * sent, 0 when not under systemd, or -errno. */
int o1_notify_send(const char *state);

#endif
