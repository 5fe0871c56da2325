// The launch environment and the TCP rendezvous. Protocol, one connection per rank: the client
// sends its rank (4 bytes, network order); the server answers the payload's length (4 bytes) and
// the payload, then closes. Every socket call is bounded by the caller's timeout.
#include "exec/launch.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace paci::exec {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
  throw RendezvousError("rendezvous: " + what);
}

int to_int(const char* name, const char* value) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < 0 || v > 1 << 30) {
    fail(std::string(name) + "='" + value + "' is not a non-negative integer");
  }
  return static_cast<int>(v);
}

struct Fd {  // closes on scope exit
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Reads or writes exactly n bytes before the deadline.
void transfer(int fd, void* data, std::size_t n, bool write, Clock::time_point deadline) {
  auto* p = static_cast<std::uint8_t*>(data);
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    const int ready = ::poll(&pfd, 1, remaining_ms(deadline));
    if (ready == 0) fail("timed out in the middle of a message");
    if (ready < 0 && errno != EINTR) fail(std::string("poll: ") + std::strerror(errno));
    if (ready < 0) continue;
    const ssize_t done = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (done == 0) fail("the peer closed the connection early");
    if (done < 0 && errno != EINTR && errno != EAGAIN) {
      fail(std::string(write ? "send: " : "recv: ") + std::strerror(errno));
    }
    if (done > 0) {
      p += done;
      n -= static_cast<std::size_t>(done);
    }
  }
}

}  // namespace

LaunchInfo launch_info_from_environment(const std::function<const char*(const char*)>& getenv) {
  const auto get = [&getenv](const char* name) -> const char* {
    return getenv ? getenv(name) : std::getenv(name);
  };
  struct Scheme {
    const char *rank, *size, *local;
  };
  const Scheme schemes[] = {
      {"PACI_RANK", "PACI_WORLD_SIZE", "PACI_LOCAL_RANK"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}};
  for (const Scheme& s : schemes) {
    const char* rank = get(s.rank);
    const char* size = get(s.size);
    if (rank == nullptr || size == nullptr) continue;
    LaunchInfo info;
    info.rank = to_int(s.rank, rank);
    info.world_size = to_int(s.size, size);
    const char* local = get(s.local);
    info.local_rank = local != nullptr ? to_int(s.local, local) : info.rank;
    info.source = s.rank;
    if (info.world_size < 1 || info.rank >= info.world_size) {
      fail(std::string(s.rank) + "=" + rank + " is not below " + s.size + "=" + size);
    }
    return info;
  }
  return LaunchInfo{0, 1, 0, "single process"};
}

Endpoint rendezvous_endpoint_from_environment(
    const std::function<const char*(const char*)>& getenv) {
  const char* value = getenv ? getenv("PACI_RENDEZVOUS") : std::getenv("PACI_RENDEZVOUS");
  Endpoint e;
  if (value == nullptr) return e;
  const std::string text = value;
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    fail("PACI_RENDEZVOUS='" + text + "' is not host:port");
  e.host = text.substr(0, colon);
  e.port = to_int("PACI_RENDEZVOUS port", text.c_str() + colon + 1);
  if (e.port == 0 || e.port > 65535) fail("PACI_RENDEZVOUS port out of range: " + text);
  return e;
}

RendezvousServer::RendezvousServer(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) fail(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd_, 128) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    fail("cannot listen on port " + std::to_string(port) + ": " + why);
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
}

RendezvousServer::~RendezvousServer() {
  if (fd_ >= 0) ::close(fd_);
}

void RendezvousServer::serve(std::span<const std::uint8_t> payload, int clients,
                             std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (int served = 0; served < clients;) {
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, remaining_ms(deadline));
    if (ready == 0) {
      fail(std::to_string(served) + " of " + std::to_string(clients) + " ranks came within " +
           std::to_string(timeout.count()) + " ms");
    }
    if (ready < 0) continue;  // EINTR
    Fd client{::accept(fd_, nullptr, nullptr)};
    if (client.fd < 0) continue;
    std::uint32_t rank = 0;
    transfer(client.fd, &rank, sizeof(rank), false, deadline);
    std::uint32_t length = htonl(static_cast<std::uint32_t>(payload.size()));
    transfer(client.fd, &length, sizeof(length), true, deadline);
    transfer(client.fd, const_cast<std::uint8_t*>(payload.data()), payload.size(), true, deadline);
    ++served;
  }
}

std::vector<std::uint8_t> fetch_from_rendezvous(const Endpoint& endpoint, int rank,
                                                std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error = "no attempt";
  while (Clock::now() < deadline) {
    addrinfo* found = nullptr;
    const int gai =
        ::getaddrinfo(endpoint.host.c_str(), std::to_string(endpoint.port).c_str(), &hints, &found);
    if (gai != 0) {
      last_error = std::string("cannot resolve ") + endpoint.host + ": " + ::gai_strerror(gai);
    } else {
      Fd fd{::socket(found->ai_family, found->ai_socktype, found->ai_protocol)};
      const int connected = fd.fd < 0 ? -1 : ::connect(fd.fd, found->ai_addr, found->ai_addrlen);
      last_error = std::strerror(errno);
      ::freeaddrinfo(found);
      if (connected == 0) {
        std::uint32_t message = htonl(static_cast<std::uint32_t>(rank));
        transfer(fd.fd, &message, sizeof(message), true, deadline);
        transfer(fd.fd, &message, sizeof(message), false, deadline);
        std::vector<std::uint8_t> payload(ntohl(message));
        transfer(fd.fd, payload.data(), payload.size(), false, deadline);
        return payload;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 may not listen yet
  }
  fail("rank " + std::to_string(rank) + " could not reach " + endpoint.host + ":" +
       std::to_string(endpoint.port) + " within " + std::to_string(timeout.count()) +
       " ms (last error: " + last_error + ")");
}

}  // namespace paci::exec
