// Compile-time checks of a typed actor handle's interface, shared by the actors'
// (tests/actors/interfaces_test.cpp) and the cluster's (tests/cluster/interfaces_test.cpp)
// interface tests: what CAF's sender and requester check before they compile a send or
// request.
#pragma once

#include <type_traits>

#include <caf/all.hpp>

namespace arbor::actors::testing {

// A send of In... to a Handle compiles.
template <class Handle, class... In>
constexpr bool takes = caf::response_type<caf::signatures_of_t<Handle>, In...>::valid;

// A request of In... to a Handle compiles and its answer is Reply (void: none).
template <class Handle, class Reply, class... In>
concept answers = requires {
  typename caf::response_type<caf::signatures_of_t<Handle>, In...>::type;
}
&&std::is_same_v<typename caf::response_type<caf::signatures_of_t<Handle>, In...>::type, caf::detail::type_list<Reply>>;

// A handle of `Narrow`'s interface can be made from one of `Wide`'s (no cast).
template <class Narrow, class Wide>
constexpr bool is_part_of = caf::detail::tl_subset_of<caf::signatures_of_t<Narrow>, caf::signatures_of_t<Wide>>::value;

}  // namespace arbor::actors::testing
