// sd_notify: one datagram to the service manager's notification socket ($NOTIFY_SOCKET), sent
// by the calling process itself. Node's net and dgram modules have no AF_UNIX datagram socket,
// and spawning `systemd-notify` would send from another process, which systemd refuses under
// its default NotifyAccess=main (it checks the sender's pid). The socket is a path, or an
// abstract name written with a leading '@' (the '@' stands for the NUL that starts the name).
//
// The send never blocks: a service manager whose queue is full answers EAGAIN rather than
// stalling the caller's event loop.
//
// `lw_notify_listen` and `lw_notify_receive` are the other end, for tests: a datagram socket
// bound to a name, that answers each message with the pid the kernel vouches for (SO_PASSCRED),
// as systemd reads it.

#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

// Fills `address` for `name` (`length` bytes, no NUL); answers the address length or -errno.
static int notify_address(const char *name, size_t length, struct sockaddr_un *address) {
  if (length < 2 || length > sizeof(address->sun_path) - 1) return -EINVAL;
  if (name[0] != '/' && name[0] != '@') return -EAFNOSUPPORT;  // e.g. vsock:, not supported
  memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  memcpy(address->sun_path, name, length);
  if (name[0] == '@') {
    address->sun_path[0] = '\0';
    return (int)(offsetof(struct sockaddr_un, sun_path) + length);
  }
  return (int)(offsetof(struct sockaddr_un, sun_path) + length + 1);
}

// Sends `message` to the socket `name`; answers 0 or -errno.
int32_t lw_notify(const char *name, size_t name_length, const uint8_t *message, size_t length) {
  struct sockaddr_un address;
  int size = notify_address(name, name_length, &address);
  if (size < 0) return size;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  ssize_t sent = sendto(fd, message, length, MSG_NOSIGNAL | MSG_DONTWAIT,
                        (struct sockaddr *)&address, (socklen_t)size);
  int error = sent < 0 ? errno : (size_t)sent != length ? EMSGSIZE : 0;
  close(fd);
  return -error;
}

// A datagram socket bound to `name`, with SO_PASSCRED; answers its descriptor or -errno.
int32_t lw_notify_listen(const char *name, size_t name_length) {
  struct sockaddr_un address;
  int size = notify_address(name, name_length, &address);
  if (size < 0) return size;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int on = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0 ||
      bind(fd, (struct sockaddr *)&address, (socklen_t)size) < 0) {
    int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

// Waits up to `timeout_ms` for one message on `fd` and copies at most `capacity` bytes of it
// into `target`, and the sender's pid into `pid[0]`; answers the message's length, or -errno
// (-ETIMEDOUT when none came).
int32_t lw_notify_receive(int32_t fd, uint8_t *target, size_t capacity, int32_t *pid,
                          int32_t timeout_ms) {
  struct pollfd wait = {.fd = fd, .events = POLLIN};
  int ready = poll(&wait, 1, timeout_ms);
  if (ready < 0) return -errno;
  if (ready == 0) return -ETIMEDOUT;
  union {
    struct cmsghdr header;
    char bytes[CMSG_SPACE(sizeof(struct ucred))];
  } control;
  struct iovec part = {.iov_base = target, .iov_len = capacity};
  struct msghdr message = {
      .msg_iov = &part,
      .msg_iovlen = 1,
      .msg_control = control.bytes,
      .msg_controllen = sizeof(control.bytes),
  };
  ssize_t length = recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (length < 0) return -errno;
  pid[0] = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c != NULL; c = CMSG_NXTHDR(&message, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      struct ucred credentials;
      memcpy(&credentials, CMSG_DATA(c), sizeof(credentials));
      pid[0] = credentials.pid;
    }
  return (int32_t)length;
}

// Closes a descriptor of `lw_notify_listen`; answers 0 or -errno.
int32_t lw_notify_close(int32_t fd) { return close(fd) < 0 ? -errno : 0; }
