#pragma once
// Include Boost.Asio through this header: Boost 1.74's awaitable.hpp uses
// std::exchange without including <utility>, which breaks under C++20.
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/thread_pool.hpp>
