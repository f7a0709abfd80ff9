{{ config(materialized='view', schema='marts') }}
-- A view model in a custom schema over a view model of public.
select customer_id, count(*) as orders
from {{ ref('big_orders') }}
group by customer_id
