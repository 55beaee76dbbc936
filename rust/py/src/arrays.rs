//! numpy dtype dispatch, in one place: which dtypes the core reads in place (`IntView`,
//! `FloatView`), and the borrowed arrays that hold them while the interpreter is released.
use dense_pt_core::masking::{FloatView, IntView};
use numpy::{PyArrayDescrMethods, PyReadonlyArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

/// A borrowed integer (or bool) numpy array of one of the dtypes the core reads directly.
pub(crate) enum IntArr<'py> {
    Bool(PyReadonlyArrayDyn<'py, bool>),
    U8(PyReadonlyArrayDyn<'py, u8>),
    I32(PyReadonlyArrayDyn<'py, i32>),
    U32(PyReadonlyArrayDyn<'py, u32>),
    I64(PyReadonlyArrayDyn<'py, i64>),
}

impl<'py> IntArr<'py> {
    /// Dispatch on the dtype first, so that only the matching extraction runs (a failed
    /// extraction builds an exception: microseconds per call on the hot path).
    pub(crate) fn new(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Self> {
        Self::with_ndim(obj, 1).ok_or_else(|| {
            invalid(
                obj.py(),
                format!("{name} must be a 1-d bool/uint8/int32/uint32/int64 array"),
            )
        })
    }

    /// A C-contiguous array of `ndim` dimensions and a directly readable dtype, else None.
    pub(crate) fn with_ndim(obj: &Bound<'py, PyAny>, ndim: usize) -> Option<Self> {
        let arr = obj.cast::<PyUntypedArray>().ok()?;
        if arr.ndim() != ndim || !arr.is_c_contiguous() {
            return None;
        }
        let dt = arr.dtype();
        let got = match (dt.kind(), dt.itemsize()) {
            (b'b', 1) => obj.extract().map(IntArr::Bool).ok(),
            (b'u', 1) => obj.extract().map(IntArr::U8).ok(),
            (b'i', 4) => obj.extract().map(IntArr::I32).ok(),
            (b'u', 4) => obj.extract().map(IntArr::U32).ok(),
            (b'i', 8) => obj.extract().map(IntArr::I64).ok(),
            _ => None,
        };
        got
    }

    pub(crate) fn view(&self) -> PyResult<IntView<'_>> {
        Ok(match self {
            IntArr::Bool(a) => IntView::Bool(a.as_slice()?),
            IntArr::U8(a) => IntView::U8(a.as_slice()?),
            IntArr::I32(a) => IntView::I32(a.as_slice()?),
            IntArr::U32(a) => IntView::U32(a.as_slice()?),
            IntArr::I64(a) => IntView::I64(a.as_slice()?),
        })
    }
}

/// A borrowed float array: float32, float64, or float16 passed as its uint16 bit patterns.
pub(crate) enum FloatArr<'py> {
    F16(PyReadonlyArrayDyn<'py, u16>),
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

impl<'py> FloatArr<'py> {
    pub(crate) fn new(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Self> {
        Self::with_ndim(obj, 1).ok_or_else(|| {
            invalid(
                obj.py(),
                format!("{name} must be a 1-d float32/float64 array or float16 bits as uint16"),
            )
        })
    }

    /// A C-contiguous float32/float64 array (or uint16 float16 bits) of `ndim` dimensions, else
    /// None.
    pub(crate) fn with_ndim(obj: &Bound<'py, PyAny>, ndim: usize) -> Option<Self> {
        let arr = obj.cast::<PyUntypedArray>().ok()?;
        if arr.ndim() != ndim || !arr.is_c_contiguous() {
            return None;
        }
        let dt = arr.dtype();
        let got = match (dt.kind(), dt.itemsize()) {
            (b'f', 4) => obj.extract().map(FloatArr::F32).ok(),
            (b'u', 2) => obj.extract().map(FloatArr::F16).ok(),
            (b'f', 8) => obj.extract().map(FloatArr::F64).ok(),
            _ => None,
        };
        got
    }

    pub(crate) fn view(&self) -> PyResult<FloatView<'_>> {
        Ok(match self {
            FloatArr::F16(a) => FloatView::F16(a.as_slice()?),
            FloatArr::F32(a) => FloatView::F32(a.as_slice()?),
            FloatArr::F64(a) => FloatView::F64(a.as_slice()?),
        })
    }
}

pub(crate) fn invalid(py: Python<'_>, msg: String) -> PyErr {
    crate::errors::to_pyerr(py, dense_pt_core::Error::invalid(msg))
}
