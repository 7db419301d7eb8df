// dgld._C's DistTensor: pull / push rows by global id (client::DistTensor),
// and creating and destroying tensors on the servers.
#include "client/dist_tensor.h"

#include "python/src/client.h"

namespace dgld::python {
namespace {

class PyDistTensor {
 public:
  PyDistTensor(std::shared_ptr<Client> client, client::DistTensor t) : client_(std::move(client)), t_(std::move(t)) {}
  int ntype() const { return t_.ntype(); }
  int etype() const { return t_.etype(); }

  static PyDistTensor open(std::shared_ptr<Client> c, const std::string& name) {
    client::DistTensor t = [&] {
      py::gil_scoped_release release;
      return unwrap(client::DistTensor::open(c->cluster(), name));
    }();
    return PyDistTensor(std::move(c), std::move(t));
  }

  static PyDistTensor create(std::shared_ptr<Client> c, const std::string& name, const std::vector<int64_t>& shape,
                             py::object dtype, bool edges, const std::string& init, double a, double b,
                             uint64_t seed, bool persistent, double timeout_s) {
    const auto scalar = torch::python::detail::py_object_to_dtype(std::move(dtype));
    const auto dt = dtype_of_scalar(scalar);
    if (!dt) throw StatusError(invalid_argument("DistTensor '" + name + "': unsupported dtype"));
    client::CreateTensor spec;
    spec.name = name;
    spec.dtype = *dt;
    spec.shape = shape;
    spec.policy = edges ? client::Policy::edge : client::Policy::node;
    if (init == "zeros") spec.init = client::Init::zeros;
    else if (init == "uniform") spec.init = client::Init::uniform;
    else if (init == "normal") spec.init = client::Init::normal;
    else throw StatusError(invalid_argument("DistTensor '" + name + "': init must be zeros, uniform or normal"));
    spec.init_a = a;
    spec.init_b = b;
    spec.seed = seed;
    spec.persistent = persistent;
    client::DistTensor t = [&] {
      py::gil_scoped_release release;
      return unwrap(client::DistTensor::create(c->cluster(), spec,
                                               std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))));
    }();
    return PyDistTensor(std::move(c), std::move(t));
  }

  std::string name() const { return t_.name(); }
  std::vector<int64_t> shape() const { return t_.shape(); }
  py::object dtype() const {
    return py::reinterpret_borrow<py::object>(
        reinterpret_cast<PyObject*>(torch::getTHPDtype(scalar_of(t_.dtype()))));
  }
  bool is_edge() const { return t_.policy() == client::Policy::edge; }

  torch::Tensor pull(const torch::Tensor& ids_in) const {
    const auto ids = as_ids(ids_in, ("DistTensor '" + t_.name() + "'").c_str());
    std::vector<int64_t> shape = t_.shape();
    shape[0] = ids.size(0);
    auto out = torch::empty(shape, torch::TensorOptions().dtype(scalar_of(t_.dtype())));
    Status st;
    {
      py::gil_scoped_release release;
      st = t_.pull_into(span_of(ids), out.data_ptr());
    }
    check(st);
    return out;
  }

  void push(const torch::Tensor& ids_in, const torch::Tensor& rows_in) const {
    const auto ids = as_ids(ids_in, ("DistTensor '" + t_.name() + "'").c_str());
    std::vector<int64_t> want = t_.shape();
    want[0] = ids.size(0);
    auto rows = rows_in.to(scalar_of(t_.dtype())).contiguous();
    if (rows.numel() != c10::multiply_integers(want)) {
      throw StatusError(invalid_argument("DistTensor '" + t_.name() + "': " + std::to_string(ids.size(0)) +
                                         " ids need rows of shape " + c10::str(c10::IntArrayRef(want)) +
                                         ", got " + c10::str(rows_in.sizes())));
    }
    Status st;
    {
      py::gil_scoped_release release;
      st = t_.push(span_of(ids), rows.data_ptr());
    }
    check(st);
  }

  void destroy(double timeout_s) {
    Status st;
    {
      py::gil_scoped_release release;
      st = t_.destroy(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    }
    check(st);
  }

  const client::DistTensor& tensor() const { return t_; }

 private:
  std::shared_ptr<Client> client_;  // the cluster must outlive the tensor
  client::DistTensor t_;
};

}  // namespace

void bind_dist_tensor(py::module_& m) {
  py::class_<PyDistTensor>(m, "DistTensor")
      .def_static("open", &PyDistTensor::open)
      .def_static("create", &PyDistTensor::create, py::arg("client"), py::arg("name"), py::arg("shape"),
                  py::arg("dtype"), py::arg("edges"), py::arg("init"), py::arg("a"), py::arg("b"), py::arg("seed"),
                  py::arg("persistent"), py::arg("timeout_s"))
      .def_property_readonly("name", &PyDistTensor::name)
      .def_property_readonly("shape", &PyDistTensor::shape)
      .def_property_readonly("dtype", &PyDistTensor::dtype)
      .def_property_readonly("is_edge", &PyDistTensor::is_edge)
      .def_property_readonly("ntype", &PyDistTensor::ntype)
      .def_property_readonly("etype", &PyDistTensor::etype)
      .def("pull", &PyDistTensor::pull)
      .def("push", &PyDistTensor::push)
      .def("destroy", &PyDistTensor::destroy, py::arg("timeout_s"));
}

}  // namespace dgld::python
