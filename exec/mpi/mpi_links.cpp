// MpiLinks: the start-up checks, pooled non-blocking sends, polled receives and collectives, the
// control tag that carries a failure to every peer, and a clean end on either path.
#include "exec/mpi/mpi_links.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "exec/fingerprint.hpp"
#include "exec/rank_plan.hpp"

namespace paci::exec::mpi {

namespace {

constexpr int kDataTag = 1;     // every message of the run, in link order
constexpr int kControlTag = 2;  // "process r failed"

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(fmt::format("{} failed: {}", call, std::string(text, length)));
}

int byte_count(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(INT_MAX))
    throw std::runtime_error(
        fmt::format("a message of {} bytes is too large for one MPI transfer", bytes));
  return static_cast<int>(bytes);
}

}  // namespace

Session::Session() {
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (!initialized) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_FUNNELED)
      throw std::runtime_error(
          "this MPI library does not let a multi-threaded process call it from its main thread "
          "(MPI_THREAD_FUNNELED)");
  }
  // Errors come back as codes (turned into exceptions), instead of ending the process.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

Session::~Session() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int Session::local_size() const {
  MPI_Comm local = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
        "MPI_Comm_split_type");
  int n = 1;
  MPI_Comm_size(local, &n);
  MPI_Comm_free(&local);
  return n;
}

std::string Session::library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string s(text, static_cast<std::size_t>(length));
  const std::size_t end = s.find_first_of(",\n");
  return end == std::string::npos ? s : s.substr(0, end);
}

namespace {

constexpr int kGatherTag = 3;                     // gathered results and states
constexpr std::size_t kGatherChunk = 1ull << 30;  // bytes per transfer (MPI counts are ints)

// What failed links leave to MPI_Finalize: kept until the process exits (after MPI_Finalize,
// which the Session's destructor calls before main returns).
std::vector<std::shared_ptr<void>>& kept_until_exit() {
  static std::vector<std::shared_ptr<void>> kept;
  return kept;
}

}  // namespace

std::vector<std::uint64_t> Session::all_gather(std::uint64_t value,
                                               std::chrono::seconds timeout) const {
  // Polled and sleeping, like every wait of the links: a process that is done early leaves the
  // cores to the others. The buffers are kept to the end if the wait gives up.
  struct Exchange {
    std::uint64_t value = 0;
    std::vector<std::uint64_t> all;
  };
  auto x = std::make_shared<Exchange>(
      Exchange{value, std::vector<std::uint64_t>(static_cast<std::size_t>(size_))});
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallgather(&x->value, 1, MPI_UINT64_T, x->all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD,
                       &request),
        "MPI_Iallgather");
  const auto begin = std::chrono::steady_clock::now();
  for (int done = 0;;) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return x->all;
    const auto waited = std::chrono::steady_clock::now() - begin;
    if (waited > timeout) {
      kept_until_exit().push_back(x);
      throw std::runtime_error(fmt::format(
          "process {}: waited {} s for the other processes to set up (PACI_LINK_TIMEOUT_S sets "
          "the limit)",
          rank_, timeout.count()));
    }
    std::this_thread::sleep_for(
        std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(waited) / 50,
                   std::chrono::microseconds(20), std::chrono::microseconds(20000)));
  }
}

MpiLinks::MpiLinks(const Schedule& schedule, std::uint64_t fingerprint,
                   std::chrono::seconds timeout, std::int32_t expert_parts)
    : timeout_(timeout) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Before waiting on anyone; early messages are kept.
  check_launch(schedule, size, false, expert_parts);
  connect(fingerprint, expert_parts);
}

MpiLinks::MpiLinks(std::uint64_t fingerprint, std::chrono::seconds timeout) : timeout_(timeout) {
  connect(fingerprint, 1);
}

void MpiLinks::connect(std::uint64_t fingerprint, std::int32_t expert_parts) {
  check(MPI_Comm_dup(MPI_COMM_WORLD, &world_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(world_, &world_rank);
  MPI_Comm_size(world_, &world_size);
  world_rank_ = world_rank;
  parts_ = expert_parts;
  part_ = world_rank_ % parts_;
  try {
    check(
        MPI_Irecv(&b_->control_in, 1, MPI_INT32_T, MPI_ANY_SOURCE, kControlTag, world_, &control_),
        "MPI_Irecv");
    // Part j's pipeline, ordered by device; device d's expert group, ordered by part.
    check(MPI_Comm_split(world_, part_, world_rank_ / parts_, &comm_), "MPI_Comm_split");
    check(MPI_Comm_split(world_, world_rank_ / parts_, part_, &experts_), "MPI_Comm_split");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(experts_, MPI_ERRORS_RETURN);
    int rank = 0, size = 1;
    MPI_Comm_rank(comm_, &rank);
    MPI_Comm_size(comm_, &size);
    rank_ = rank;
    size_ = size;
    b_->fingerprint = fingerprint;
    b_->prints.assign(static_cast<std::size_t>(world_size), 0);
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(&b_->fingerprint, 1, MPI_UINT64_T, b_->prints.data(), 1, MPI_UINT64_T,
                         world_, &request),
          "MPI_Iallgather");
    wait(request, "the start-up check", -1);
    check_fingerprints(b_->prints, world_rank_);
  } catch (...) {
    // No destructor runs for a constructor that throws: tell the peers, and keep what MPI may
    // still write to (the control receive's and the start-up check's buffers) until the end.
    abort();
    close();
    throw;
  }
}

MpiLinks::~MpiLinks() {
  close();
}

void MpiLinks::close() noexcept {
  if (world_ == MPI_COMM_NULL) return;
  const bool clean = !aborted_ && !peer_failed_;
  if (clean) {
    try {
      wait_sends();
    } catch (...) {  // a peer failed at the very end: as after any failure, below
    }
  }
  for (MPI_Request* r : {&control_, &partner_})
    if (*r != MPI_REQUEST_NULL) {  // a receive: cancelled locally
      MPI_Cancel(r);
      MPI_Wait(r, MPI_STATUS_IGNORE);
    }
  cancel_receive();
  // The failure notices get a moment to leave; then whatever nobody completed is MPI_Finalize's,
  // and the buffers it may still touch are kept until the process exits.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (MPI_Request& r : control_sends_) {
    int done = 0;
    while (MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (!done) MPI_Request_free(&r);
  }
  bool pending = false;
  for (Outgoing& o : b_->sends)
    if (o.request != MPI_REQUEST_NULL) {
      MPI_Request_free(&o.request);
      pending = true;
    }
  if (clean && !pending) {
    for (MPI_Comm* c : {&comm_, &experts_, &world_})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  } else {
    kept_until_exit().push_back(std::shared_ptr<Buffers>(std::move(b_)));
    comm_ = experts_ = world_ = MPI_COMM_NULL;
  }
}

void MpiLinks::cancel_receive() noexcept {
  if (receiving_ == MPI_REQUEST_NULL) return;
  // A receive cancels locally, unless its message is already arriving: then it completes (and one
  // from a peer that died mid-message is left to MPI_Finalize, its buffer kept).
  MPI_Cancel(&receiving_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  int done = 0;
  while (MPI_Test(&receiving_, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (!done) MPI_Request_free(&receiving_);
  receiving_ = MPI_REQUEST_NULL;
}

void MpiLinks::check_peers() {
  if (!peer_failed_ && control_ != MPI_REQUEST_NULL) {
    int done = 0;
    check(MPI_Test(&control_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) {
      control_ = MPI_REQUEST_NULL;
      peer_failed_ = true;
    }
  }
  if (peer_failed_)
    throw QuietExit(fmt::format("process {}: process {} failed", world_rank_, b_->control_in), 1);
}

void MpiLinks::wait(MPI_Request& request, const char* what, std::int32_t peer, MPI_Status* status,
                    bool sleep) {
  poll(
      [&] {
        int done = 0;
        check(MPI_Test(&request, &done, status ? status : MPI_STATUS_IGNORE), "MPI_Test");
        return done != 0;
      },
      what, peer, sleep);
}

void MpiLinks::poll(const std::function<bool()>& done, const char* what, std::int32_t peer,
                    bool sleep) {
  // Spin briefly (a message often lands within microseconds), then sleep between polls so that a
  // waiting process leaves the cores to the ones computing: the longer the wait so far, the longer
  // the sleep (a fiftieth of it, 20 us to 20 ms), so a message is seen at most 2% late. (Waking
  // more often slows the computing processes: the wake-ups of three processes waiting 1 ms apart
  // made three stage threads on two cores 35% slower.)
  const auto begin = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    if (done()) return;
    check_peers();
    const auto now = std::chrono::steady_clock::now();
    if (now - begin > timeout_)
      throw std::runtime_error(fmt::format(
          "process {}: waited {} s for {}{} (a peer may have stopped; PACI_LINK_TIMEOUT_S sets "
          "the limit)",
          world_rank_, timeout_.count(), what, peer >= 0 ? fmt::format(" process {}", peer) : ""));
    if (polls < 200 || !sleep) {
      std::this_thread::yield();
      continue;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(now - begin);
    std::this_thread::sleep_for(
        std::clamp(waited / 50, std::chrono::microseconds(20), std::chrono::microseconds(20000)));
  }
}

void MpiLinks::reclaim_sends() {
  while (!b_->sends.empty()) {
    int done = 0;
    check(MPI_Test(&b_->sends.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (!done) return;
    b_->spare.push_back(std::move(b_->sends.front().bytes));
    b_->sends.pop_front();
  }
}

void MpiLinks::wait_sends() {
  while (!b_->sends.empty()) {
    wait(b_->sends.front().request, "a send to", world_of_device(b_->sends.front().dst));
    b_->spare.push_back(std::move(b_->sends.front().bytes));
    b_->sends.pop_front();
  }
}

void MpiLinks::send(std::int32_t src, std::int32_t dst, const MessageKey& key,
                    std::span<const float> data, SendTimes times) {
  if (src != rank_ || dst < 0 || dst >= size_ || dst == rank_)
    throw std::logic_error(
        fmt::format("process {} cannot send from device {} to device {}", rank_, src, dst));
  check_peers();
  reclaim_sends();
  Outgoing o;
  if (!b_->spare.empty()) {
    o.bytes = std::move(b_->spare.back());
    b_->spare.pop_back();
  }
  o.dst = dst;
  o.bytes.resize(sizeof(Header) + data.size_bytes());
  if (clock != nullptr) times.end_s = clock->now_s();
  const Header h{static_cast<std::int32_t>(key.kind),    key.producer_stage, key.microbatch,
                 static_cast<std::int32_t>(data.size()), times.start_s,      times.end_s};
  std::memcpy(o.bytes.data(), &h, sizeof(h));
  std::memcpy(o.bytes.data() + sizeof(h), data.data(), data.size_bytes());
  // The deque keeps the vector (and so its heap buffer) in place until the send completes.
  b_->sends.push_back(std::move(o));
  Outgoing& queued = b_->sends.back();
  check(MPI_Isend(queued.bytes.data(), byte_count(queued.bytes.size()), MPI_BYTE, dst, kDataTag,
                  comm_, &queued.request),
        "MPI_Isend");
}

SendTimes MpiLinks::receive(std::int32_t dst, std::int32_t src, const MessageKey& key,
                            std::span<float> out) {
  if (dst != rank_ || src < 0 || src >= size_ || src == rank_)
    throw std::logic_error(
        fmt::format("process {} cannot receive on device {} from device {}", rank_, dst, src));
  check_peers();
  reclaim_sends();
  const auto unpack = [&](const std::vector<char>& in, std::size_t bytes) -> SendTimes {
    Header h;
    std::memcpy(&h, in.data(), sizeof(h));
    if (bytes != sizeof(Header) + out.size_bytes())
      throw std::runtime_error(fmt::format(
          "process {}: from process {} came a message of {} bytes (stage {}, micro-batch {}) "
          "where {} bytes of stage {}, micro-batch {} were expected: the processes do not run "
          "the same schedule",
          world_rank_, world_of_device(src), bytes, h.stage, h.microbatch,
          sizeof(Header) + out.size_bytes(), key.producer_stage, key.microbatch));
    std::memcpy(out.data(), in.data() + sizeof(h), out.size_bytes());
    return {h.send_start_s, h.send_end_s};
  };
  const auto id = [&](std::int32_t from, const MessageKey& k) {
    return std::make_tuple(from, static_cast<int>(k.kind), k.producer_stage, k.microbatch);
  };
  // Received earlier, ahead of its turn.
  if (const auto it = b_->early.find(id(src, key)); it != b_->early.end()) {
    const SendTimes times = unpack(it->second, it->second.size());
    b_->early.erase(it);
    return times;
  }
  // Every message of the link comes in its sending order: the ones ahead of this one are kept.
  // They differ in size (a stage boundary's activation or gradient, or, with two copies of the
  // model, a stage's whole gradients for its twin): each is probed for its size first.
  std::vector<char>& in = b_->incoming;
  for (;;) {
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status probed;
    poll(
        [&] {
          int found = 0;
          check(MPI_Improbe(src, kDataTag, comm_, &found, &message, &probed), "MPI_Improbe");
          return found != 0;
        },
        "a message from", world_of_device(src), true);
    int bytes = 0;
    MPI_Get_count(&probed, MPI_BYTE, &bytes);
    in.resize(static_cast<std::size_t>(std::max(bytes, 1)));
    check(MPI_Imrecv(in.data(), bytes, MPI_BYTE, &message, &receiving_), "MPI_Imrecv");
    wait(receiving_, "a message from", world_of_device(src));
    Header h;
    if (static_cast<std::size_t>(bytes) < sizeof(h))
      throw std::runtime_error(fmt::format(
          "process {}: from process {} came a message of {} bytes, shorter than its header: the "
          "processes do not run the same schedule",
          world_rank_, world_of_device(src), bytes));
    std::memcpy(&h, in.data(), sizeof(h));
    const MessageKey got{static_cast<DependencyKind>(h.kind), h.stage, h.microbatch};
    if (got == key) return unpack(in, static_cast<std::size_t>(bytes));
    in.resize(static_cast<std::size_t>(bytes));
    if (!b_->early.emplace(id(src, got), in).second)
      throw std::runtime_error(fmt::format(
          "process {}: from process {} came stage {}, micro-batch {} twice before its consumer "
          "asked: the processes do not run the same schedule",
          world_rank_, world_of_device(src), h.stage, h.microbatch));
  }
}

bool MpiLinks::ready(std::int32_t, std::int32_t, const MessageKey&) {
  // Only a sequential replay asks, and it runs every device in one process.
  throw std::logic_error("MpiLinks::ready: a sequential replay cannot run one process per device");
}

void MpiLinks::barrier() {
  check_peers();
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
  wait(request, "the other processes at a barrier", -1);
  // A process that slept through the first barrier's end would see it late; a second one, spun
  // through, ends in every process within microseconds (what starts the run clocks).
  check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
  wait(request, "the other processes at a barrier", -1, nullptr, false);
}

std::vector<std::string> MpiLinks::gather(std::string bytes, std::int32_t root) {
  return gather_on(comm_, std::move(bytes), root);
}

std::vector<std::string> MpiLinks::gather_expert_parts(std::string bytes) {
  return gather_on(experts_, std::move(bytes), 0);
}

std::vector<std::string> MpiLinks::gather_on(MPI_Comm comm, std::string bytes, std::int32_t root) {
  check_peers();
  int me = 0, n = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  Buffers& b = *b_;
  b.size = static_cast<std::int64_t>(bytes.size());
  b.sizes.assign(static_cast<std::size_t>(n), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Igather(&b.size, 1, MPI_INT64_T, b.sizes.data(), 1, MPI_INT64_T, root, comm, &request),
        "MPI_Igather");
  wait(request, "the other processes' sizes", -1);
  // Point to point in chunks: a state of several GiB passes too (a collective counts in ints).
  if (me != root) {
    b.gather_out = std::move(bytes);
    for (std::size_t at = 0; at < b.gather_out.size(); at += kGatherChunk) {
      const std::size_t n = std::min(kGatherChunk, b.gather_out.size() - at);
      check(MPI_Isend(b.gather_out.data() + at, byte_count(n), MPI_BYTE, root, kGatherTag, comm,
                      &request),
            "MPI_Isend");
      wait(request, "the results to reach", world_rank_in(comm, root));
    }
    return {};
  }
  b.gather_in.assign(static_cast<std::size_t>(n), std::string());
  for (std::int32_t r = 0; r < n; ++r) {
    std::string& in = b.gather_in[static_cast<std::size_t>(r)];
    if (r == root) {
      in = std::move(bytes);
      continue;
    }
    in.resize(static_cast<std::size_t>(b.sizes[static_cast<std::size_t>(r)]));
    for (std::size_t at = 0; at < in.size(); at += kGatherChunk) {
      const std::size_t n = std::min(kGatherChunk, in.size() - at);
      check(MPI_Irecv(in.data() + at, byte_count(n), MPI_BYTE, r, kGatherTag, comm, &receiving_),
            "MPI_Irecv");
      wait(receiving_, "the results of", world_rank_in(comm, r));
    }
  }
  return std::move(b.gather_in);
}

std::int32_t MpiLinks::world_rank_in(MPI_Comm comm, std::int32_t rank) const {
  MPI_Group from = MPI_GROUP_NULL, to = MPI_GROUP_NULL;
  int out = MPI_UNDEFINED;
  if (MPI_Comm_group(comm, &from) == MPI_SUCCESS && MPI_Comm_group(world_, &to) == MPI_SUCCESS)
    MPI_Group_translate_ranks(from, 1, &rank, to, &out);
  if (from != MPI_GROUP_NULL) MPI_Group_free(&from);
  if (to != MPI_GROUP_NULL) MPI_Group_free(&to);
  return out == MPI_UNDEFINED ? rank : out;
}

void MpiLinks::share(std::span<float> rows, std::span<const std::size_t> first, std::size_t width) {
  if (first.size() != static_cast<std::size_t>(parts_) + 1 || first.back() * width != rows.size() ||
      width == 0 || width > static_cast<std::size_t>(INT_MAX) ||
      first.back() > static_cast<std::size_t>(INT_MAX))
    throw std::logic_error("MpiLinks::share: rows that do not match the expert group");
  check_peers();
  Buffers& b = *b_;
  // The routing's bounds agree in every member (the same data, the same arithmetic): checked
  // first, so that a group whose routing diverged stops with a line, not an all-gather of counts
  // that disagree.
  b.share_print = fingerprint(
      std::string_view(reinterpret_cast<const char*>(first.data()), first.size_bytes()));
  b.share_prints.assign(static_cast<std::size_t>(parts_), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallgather(&b.share_print, 1, MPI_UINT64_T, b.share_prints.data(), 1, MPI_UINT64_T,
                       experts_, &request),
        "MPI_Iallgather");
  wait(request, "the expert group's routing", -1);
  for (std::size_t m = 1; m < b.share_prints.size(); ++m)
    if (b.share_prints[m] != b.share_prints[0])
      throw std::runtime_error(fmt::format(
          "process {}: the expert group of device {} routes differently in its parts 0 and {}: its "
          "processes do not hold the same data or do not compute the same bits",
          world_rank_, rank_, m));
  // Rows of `width` floats (one datatype), staged in a buffer the links own: after a failure MPI
  // may write into it until MPI_Finalize, and it is kept until the process exits.
  b.share_rows.resize(rows.size());
  const auto part = static_cast<std::size_t>(part_);
  std::copy(rows.begin() + static_cast<std::ptrdiff_t>(first[part] * width),
            rows.begin() + static_cast<std::ptrdiff_t>(first[part + 1] * width),
            b.share_rows.begin() + static_cast<std::ptrdiff_t>(first[part] * width));
  b.counts.resize(static_cast<std::size_t>(parts_));
  b.displs.resize(static_cast<std::size_t>(parts_));
  for (std::size_t m = 0; m < b.counts.size(); ++m) {
    b.counts[m] = static_cast<int>(first[m + 1] - first[m]);
    b.displs[m] = static_cast<int>(first[m]);
  }
  MPI_Datatype row = MPI_DATATYPE_NULL;
  check(MPI_Type_contiguous(static_cast<int>(width), MPI_FLOAT, &row), "MPI_Type_contiguous");
  MPI_Type_commit(&row);
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b.share_rows.data(), b.counts.data(),
                        b.displs.data(), row, experts_, &request),
        "MPI_Iallgatherv");
  MPI_Type_free(&row);  // freed once the pending collective is done with it
  wait(request, "the expert group's rows", -1);
  for (std::size_t m = 0; m < b.counts.size(); ++m)
    if (m != part)
      std::copy(b.share_rows.begin() + static_cast<std::ptrdiff_t>(first[m] * width),
                b.share_rows.begin() + static_cast<std::ptrdiff_t>(first[m + 1] * width),
                rows.begin() + static_cast<std::ptrdiff_t>(first[m] * width));
}

bool MpiLinks::partner_failed(std::chrono::milliseconds within) noexcept {
  if (parts_ == 1 || part_ == 0 || world_ == MPI_COMM_NULL || peer_failed_) return false;
  const std::int32_t partner = world_rank_ - part_;  // part 0 of this device
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    int done = 0;
    if (control_ != MPI_REQUEST_NULL) {
      if (MPI_Test(&control_, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
      if (done) {
        control_ = MPI_REQUEST_NULL;
        if (b_->control_in == partner) return true;
        // Another process's notice came first: the partner's, if any, comes on its own.
        if (MPI_Irecv(&b_->partner_in, 1, MPI_INT32_T, partner, kControlTag, world_, &partner_) !=
            MPI_SUCCESS)
          return false;
      }
    } else if (partner_ != MPI_REQUEST_NULL) {
      if (MPI_Test(&partner_, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
      if (done) {
        partner_ = MPI_REQUEST_NULL;
        return true;
      }
    } else {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

void MpiLinks::abort() noexcept {
  if (aborted_ || world_ == MPI_COMM_NULL) return;
  aborted_ = true;
  if (peer_failed_) return;  // the failed peer told everyone itself
  int world_size = 1;
  MPI_Comm_size(world_, &world_size);
  b_->control_out.assign(static_cast<std::size_t>(world_size), world_rank_);
  for (std::int32_t r = 0; r < world_size; ++r) {
    if (r == world_rank_) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Isend(&b_->control_out[static_cast<std::size_t>(r)], 1, MPI_INT32_T, r, kControlTag,
                  world_, &request) == MPI_SUCCESS)
      control_sends_.push_back(request);
  }
}

namespace {

// Half the round trip of `n` floats between this process and `peer`, `repeats` times after
// `warmup` unmeasured ones; `first` starts the round trip (the other end answers).
std::vector<double> ping_pong(MpiLinks& links, std::int32_t peer, bool first, std::size_t n,
                              std::size_t repeats, std::size_t warmup) {
  const std::int32_t me = links.local_device();
  std::vector<float> data(n, 1.0f), back(n);
  std::vector<double> half;
  for (std::size_t r = 0; r < warmup + repeats; ++r) {
    const auto tag = static_cast<std::int32_t>(r);
    if (first) {
      const auto t0 = std::chrono::steady_clock::now();
      links.send(me, peer, {DependencyKind::activation, me, tag}, data, {});
      links.receive(me, peer, {DependencyKind::activation, peer, tag}, back);
      const std::chrono::duration<double> rtt = std::chrono::steady_clock::now() - t0;
      if (r >= warmup) half.push_back(rtt.count() / 2);
    } else {
      links.receive(me, peer, {DependencyKind::activation, peer, tag}, back);
      links.send(me, peer, {DependencyKind::activation, me, tag}, back, {});
    }
  }
  links.wait_sends();
  return half;
}

}  // namespace

std::vector<PairLinkMeasurement> measure_links(MpiLinks& links, std::size_t floats,
                                               std::size_t repeats) {
  using nlohmann::json;
  const std::int32_t me = links.local_device(), n = links.processes();
  constexpr std::size_t kWarmup = 5;
  json mine = json::array();
  for (std::int32_t a = 0; a < n; ++a)
    for (std::int32_t b = a + 1; b < n; ++b) {
      if (me == a || me == b) {
        const std::int32_t peer = me == a ? b : a;
        const auto small = ping_pong(links, peer, me == a, 1, repeats, kWarmup);
        const auto large = ping_pong(links, peer, me == a, floats, repeats, kWarmup);
        if (me == a) {
          PairLinkMeasurement m;
          m.latency_s = spread_of(small);
          m.transfer_s = spread_of(large);
          mine.push_back({a, b, m.latency_s.min, m.latency_s.median, m.latency_s.max,
                          m.transfer_s.min, m.transfer_s.median, m.transfer_s.max});
        }
      }
      links.barrier();
    }
  const auto parts = links.gather(mine.dump(), 0);
  std::vector<PairLinkMeasurement> out;
  const auto bytes = static_cast<std::int64_t>(floats * sizeof(float));
  for (const std::string& part : parts)
    for (const json& x : json::parse(part)) {
      PairLinkMeasurement m;
      m.a = x.at(0).get<std::int32_t>();
      m.b = x.at(1).get<std::int32_t>();
      m.latency_s = {x.at(2).get<double>(), x.at(3).get<double>(), x.at(4).get<double>(), repeats};
      m.transfer_s = {x.at(5).get<double>(), x.at(6).get<double>(), x.at(7).get<double>(), repeats};
      m.bytes = bytes;
      // A transfer no slower than a one-float message (noise): as fast as this clock can tell.
      m.bandwidth_bytes_per_s =
          static_cast<double>(bytes) / std::max(m.transfer_s.median - m.latency_s.median, 1e-9);
      out.push_back(m);
    }
  std::sort(out.begin(), out.end(),
            [](const auto& x, const auto& y) { return std::tie(x.a, x.b) < std::tie(y.a, y.b); });
  return out;
}

std::vector<std::string> node_names(MpiLinks& links) {
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  return links.gather(std::string(name, static_cast<std::size_t>(length)), 0);
}

}  // namespace paci::exec::mpi
